"""A staff user's JWT reaches model-asynch's model configuration endpoints only with the
permission to change model configs (``asynch.change_asynchmodel``; a superuser has it),
tried on the live API: without it every endpoint is ``403 FORBIDDEN`` and ``listModels``
gives the summary a tenant that is not an admin gets; admin tenants keep their access."""

from __future__ import annotations

import pytest
import requests
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission

from tests.support.security.egress import api, error, shared_var, tenant_http  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "a staff password 123"
CONFIG = {"modelName": "probe", "baseUrl": "https://93.184.215.14", "apiKey": "API_KEY:sk-secret-value-0123456789"}


@pytest.fixture(autouse=True)
def _hasher(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # one the live API checks


def _jwt(api_url: str, username: str) -> dict[str, str]:
    response = requests.post(f"{api_url}/auth/token", json={"username": username, "password": PASSWORD}, timeout=30)
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access']}"}


def _staff(username: str, *permissions: str):  # type: ignore[no-untyped-def]
    user = get_user_model().objects.create_user(username, f"{username}@example.com", PASSWORD, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=permissions))
    return user


def _every_endpoint(api_url: str, headers: dict[str, str]) -> dict[str, requests.Response]:
    def post(path: str, body: dict) -> requests.Response:
        return requests.post(api_url + path, json=body, headers=headers, timeout=30)

    return {
        "createModel": post("/model/createModel", CONFIG),
        "getModel": requests.get(
            f"{api_url}/model/getModel", params={"modelName": "probe"}, headers=headers, timeout=30
        ),
        "updateModel": post("/model/updateModel", {"modelName": "probe", "remark": "changed"}),
        "deleteModel": post("/model/deleteModel", {"modelName": "probe"}),
    }


def test_staff_without_the_permission_to_change_model_configs_is_refused(api, shared_var):  # noqa: F811
    admin = tenant_http(api, "ops", is_admin=True)
    assert admin.post("/model/createModel", {**CONFIG, "modelName": "existing"}).status_code == 201
    _staff("viewer", "view_asynchmodel")  # may look at model configs in the admin, not change them
    headers = _jwt(api.url, "viewer")
    for endpoint, response in _every_endpoint(api.url, headers).items():
        assert response.status_code == 403 and error(response)["code"] == "FORBIDDEN", (endpoint, response.text)
    # listModels: what any tenant may know (names and limits), never where a model runs or its key.
    listed = requests.get(f"{api.url}/model/listModels", headers=headers, timeout=30)
    assert listed.status_code == 200
    (item,) = listed.json()["results"]
    assert item["modelName"] == "existing" and not {"baseUrl", "apiKey", "route", "id"} & set(item)
    # The admin tenant's key keeps its access.
    assert admin.get("/model/getModel", {"modelName": "existing"}).status_code == 200
    assert admin.get("/model/listModels").json()["results"][0]["baseUrl"] == CONFIG["baseUrl"]


@pytest.mark.parametrize("how", ["permission", "group", "superuser"])
def test_staff_reach_every_endpoint_once_they_may_change_model_configs(api, shared_var, how):  # noqa: F811
    user = _staff("editor")
    headers = _jwt(api.url, "editor")
    assert error(_every_endpoint(api.url, headers)["createModel"])["code"] == "FORBIDDEN"  # staff alone: no
    if how == "permission":
        user.user_permissions.add(Permission.objects.get(codename="change_asynchmodel"))
    elif how == "group":
        editors = Group.objects.create(name="model editors")
        editors.permissions.add(Permission.objects.get(codename="change_asynchmodel"))
        user.groups.add(editors)
    else:
        user.is_superuser = True
        user.save(update_fields=["is_superuser"])
    answered = _every_endpoint(api.url, headers)  # the same token: the permission is read per request
    assert [answered[name].status_code for name in answered] == [201, 200, 200, 200], {
        name: response.text for name, response in answered.items()
    }
    assert answered["getModel"].json()["baseUrl"] == CONFIG["baseUrl"]
    assert requests.post(f"{api.url}/model/createModel", json=CONFIG, headers=headers, timeout=30).status_code == 201
    listed = requests.get(f"{api.url}/model/listModels", headers=headers, timeout=30).json()["results"]
    assert listed[0]["baseUrl"] == CONFIG["baseUrl"] and "****" in listed[0]["apiKey"]
