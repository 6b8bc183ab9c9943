"""Where model-asynch sends a model's request, tried as an attacker would: against the
live API (gunicorn) and the project's worker drain, with a recording attacker's server
that must never see a stored key.

- An admin tenant cannot move a config, with its stored key headers, to a new host
  without sending a key for it.
- The worker follows no redirect: a 3xx is a failed call, the key stays with the host
  the config names. Nor does the OSS upload with the caller's forwarded headers.
- A ``baseUrl`` on a loopback, link-local (cloud metadata) or private address, or plain
  http:// to a host not listed in ``ASYNCH_ALLOWED_MODEL_HOSTS``, is refused when set
  and again before each call."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from asynch import services
from asynch.models import AsynchModel, AsynchModelStat, TaskState
from tests.support.asynch_fixtures import make_model, run_queue, tenant_client
from tests.support.security.egress import (  # noqa: F401  (fixtures)
    ATTACKER_HOST,
    MODEL_HOST,
    STORED_VALUES,
    Seen,
    api,
    drain,
    error,
    json_answer,
    recording,
    shared_var,
    task,
    tenant_http,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def admin(api, shared_var):  # noqa: F811
    return tenant_http(api, "ops", is_admin=True)


@pytest.fixture
def biz(api, shared_var):  # noqa: F811
    return tenant_http(api, "biz")


def _calls() -> int:
    return sum(AsynchModelStat.objects.values_list("request_count", flat=True))


# --- a stored key never follows a config to a new host ------------------------------------------


def test_moving_a_config_to_the_attackers_host_without_its_key_is_refused_and_calls_stay_home(admin, biz):
    with recording(MODEL_HOST, lambda seen: json_answer({"ok": True})) as model, recording(ATTACKER_HOST) as attacker:
        assert admin.create_model("chat", model.url).status_code == 201
        for moved in (
            attacker.url,  # another host (listed too: only the key rule stands in the way)
            f"http://{MODEL_HOST}:{attacker.port}",  # the same host, another port
            f"https://{MODEL_HOST}:{model.port}",  # the same host and port, another scheme
        ):
            response = admin.post("/model/updateModel", {"modelName": "chat", "baseUrl": moved})
            assert response.status_code == 400, response.text
            assert error(response)["code"] == "VALIDATION_ERROR" and list(error(response)["fields"]) == ["apiKey"]
        # Nor does it move along with other changes.
        response = admin.post("/model/updateModel", {"modelName": "chat", "baseUrl": attacker.url, "remark": "x"})
        assert list(error(response)["fields"]) == ["apiKey"]
        assert admin.get("/model/getModel", {"modelName": "chat"}).json()["baseUrl"] == model.url

        task_id = biz.create_task("chat")
        assert drain()["succeeded"] == 1
        assert biz.result(task_id)["state"] == 2
        (call,) = model.seen
        assert call.headers["API_KEY"] == STORED_VALUES[0]  # the key still goes where it was given for
        assert not attacker.touched()

        # A new path on the same origin keeps its key; a new host with a key of its own
        # is fine, and only that key goes there.
        assert admin.post("/model/updateModel", {"modelName": "chat", "baseUrl": model.url + "/v2"}).status_code == 200
        moved = admin.post(
            "/model/updateModel", {"modelName": "chat", "baseUrl": attacker.url, "apiKey": "X-New:given"}
        )
        assert moved.status_code == 200, moved.text
        biz.create_task("chat")
        assert drain()["succeeded"] == 1
        (there,) = attacker.seen
        assert there.headers["X-New"] == "given"
        assert not any(there.carries(value) for value in STORED_VALUES)


# --- no redirect is followed ----------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_the_attacker_fails_the_call_and_the_attacker_sees_nothing(admin, biz, status):
    with recording(ATTACKER_HOST) as attacker:

        def redirect(seen: Seen) -> tuple[int, dict[str, str], bytes]:
            return status, {"Location": attacker.url + "/steal", "Content-Type": "text/plain"}, b"moved"

        with recording(MODEL_HOST, redirect) as model:
            assert admin.create_model("chat", model.url, retryTimes=1).status_code == 201
            task_id = biz.create_task("chat", {"prompt": "hi"})
            assert drain()["failed"] == 1
            result = biz.result(task_id)
            assert result["state"] == 3 and str(status) in result["errorMessage"]
            assert "redirect" in result["errorMessage"] and result["ossFile"] is None
            assert task(task_id).http_status == status
            assert len(model.seen) == 1 and _calls() == 1  # a call was made, and counted
            # Retried by the normal rules, and refused to follow again.
            assert services.tasks_clean()["retried"] == 1
            assert drain()["failed"] == 1
            assert len(model.seen) == 2 and task(task_id).retry_count == 1
        assert not attacker.touched()


def test_the_oss_upload_follows_no_redirect_with_the_callers_forwarded_headers(settings):
    # The OSS file service is the operator's (OSS_UPLOAD_URL); a redirect it answers must
    # not carry the business caller's Authorization and X-User-Info anywhere else.
    with recording(ATTACKER_HOST) as attacker:

        def oss(seen: Seen) -> tuple[int, dict[str, str], bytes]:
            if seen.path.startswith("/oss/"):
                return 307, {"Location": attacker.url + "/oss/file/uploadFile"}, b""
            return json_answer({"answer": 42})

        with recording(MODEL_HOST, oss) as service:
            settings.ASYNCH_ALLOWED_MODEL_HOSTS = [MODEL_HOST]
            settings.ASYNCH_RESULT_STORAGE = "oss_service"
            settings.OSS_UPLOAD_URL = service.url + "/oss/file/uploadFile"
            settings.ASYNCH_STORAGE_ATTEMPTS = 1
            make_model(base_url=service.url, retry_times=0)
            caller = tenant_client("biz")
            task_id = caller.create_task(
                "model-service", HTTP_AUTHORIZATION="Bearer caller-token-secret", HTTP_X_USER_INFO="user-info-secret"
            ).json()["taskId"]
            assert run_queue() == ["failed"]
            assert "307" in task(task_id).error_message and "redirect" in task(task_id).error_message
            upload = service.seen[-1]
            assert (
                upload.path == "/oss/file/uploadFile"
                and upload.headers["Authorization"] == "Bearer caller-token-secret"
            )
        assert not attacker.touched()


# --- baseUrl rules, when set ------------------------------------------------------------------------

REFUSED = [
    "http://127.0.0.1:8000",  # loopback, not listed
    "http://localhost:8000",
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata
    "http://10.0.0.8",
    "http://[::1]:8000",
    "https://127.0.0.1:8443",  # https changes nothing for a non-public address
    "https://localhost",
    "https://169.254.169.254",
    "https://10.1.2.3",
    "https://172.16.0.1",
    "https://192.168.1.1",
    "https://[::1]",
    "https://[fe80::1]",
    "https://[fd00::1]",
    "https://0.0.0.0",
    "https://[::ffff:127.0.0.1]",  # loopback wrapped in IPv6
    "https://2130706433",  # 127.0.0.1 spelled as a number
    "http://93.184.215.14",  # public, but plain http:// to a host not listed
]


def test_a_base_url_on_a_loopback_link_local_or_private_address_is_refused_on_base_url(admin):
    for base_url in REFUSED:
        response = admin.create_model("probe", base_url)
        assert response.status_code == 400, (base_url, response.text)
        assert error(response)["code"] == "VALIDATION_ERROR" and list(error(response)["fields"]) == ["baseUrl"], (
            base_url
        )
    assert admin.get("/model/listModels").json()["results"] == []

    # A public https:// address is a model host; an existing config cannot be moved either.
    assert admin.create_model("public", "https://93.184.215.14").status_code == 201
    for base_url in REFUSED:
        response = admin.post("/model/updateModel", {"modelName": "public", "baseUrl": base_url, "apiKey": "K:V"})
        assert response.status_code == 400 and "baseUrl" in error(response)["fields"], (base_url, response.text)
    assert admin.get("/model/getModel", {"modelName": "public"}).json()["baseUrl"] == "https://93.184.215.14"


# --- baseUrl rules, before each call ---------------------------------------------------------------


def test_a_host_allowed_when_set_but_not_at_call_time_is_not_called(admin, biz, settings):
    with recording(MODEL_HOST, lambda seen: json_answer({"ok": True})) as model:
        assert admin.create_model("chat", model.url).status_code == 201  # the API lists MODEL_HOST
        task_id = biz.create_task("chat")
        settings.ASYNCH_ALLOWED_MODEL_HOSTS = []  # the worker's setting no longer does
        assert drain()["failed"] == 1
        result = biz.result(task_id)
        assert result["state"] == 3 and "not called" in result["errorMessage"]
        assert "ASYNCH_ALLOWED_MODEL_HOSTS" in result["errorMessage"]
        assert MODEL_HOST not in result["errorMessage"]  # the tenant learns nothing of where it runs
        assert not any(value in result["errorMessage"] for value in STORED_VALUES)
        assert task(task_id).http_status is None and _calls() == 0  # nothing was sent
        assert not model.touched()


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This process's name resolution with a few names of the test's own (what a
    hostile DNS server would answer); any other name resolves as usual."""
    names: dict[str, str] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.lower() in names:
            host = names[host.lower()]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names


def test_a_name_that_resolves_to_loopback_at_call_time_is_not_called(admin, biz, resolver):
    with recording(ATTACKER_HOST) as attacker:
        # Set while the name resolved nowhere private (the live API cannot resolve it at all)...
        base_url = f"https://models.rebind.test:{attacker.port}"
        assert admin.create_model("chat", base_url).status_code == 201
        task_id = biz.create_task("chat")
        # ...then it resolves to this machine's own address.
        resolver["models.rebind.test"] = ATTACKER_HOST
        assert drain()["failed"] == 1
        result = biz.result(task_id)
        assert "not called" in result["errorMessage"] and "loopback" in result["errorMessage"]
        assert task(task_id).state == TaskState.FAILED and _calls() == 0
    assert not attacker.touched()  # not even a TLS handshake


# --- the same rules in Django admin's model config form ------------------------------------------


def _form(model: Any, **changes: Any) -> dict[str, Any]:
    fields = ("model_name", "base_url", "route", "http_method", "max_concurrency", "queue_limit", "timeout_seconds",
              "retry_times", "retry_queue_max_seconds", "auto_clean_seconds", "remark")  # fmt: skip
    form = {name: getattr(model, name) for name in fields}
    return {**form, "enabled": "on", "api_key": "", **changes}


def test_the_admins_model_config_form_keeps_the_key_home_and_refuses_private_hosts(settings):
    settings.ASYNCH_ALLOWED_MODEL_HOSTS = [MODEL_HOST, ATTACKER_HOST]
    operator = Client()
    operator.force_login(get_user_model().objects.create_superuser("operator", "op@example.com", "pw"))
    model = make_model("chat", base_url=f"http://{MODEL_HOST}:8000", api_key="API_KEY:" + STORED_VALUES[0])
    change = f"/admin/asynch/asynchmodel/{model.pk}/change/"

    moved = operator.post(change, _form(model, base_url=f"http://{ATTACKER_HOST}:8000"))
    assert moved.status_code == 200 and "enter the key headers again" in moved.content.decode()
    private = operator.post(change, _form(model, base_url="https://10.0.0.8", api_key="K:V"))
    assert private.status_code == 200 and "10.0.0.8 is a private address" in private.content.decode()
    added = operator.post(
        "/admin/asynch/asynchmodel/add/", _form(model, model_name="other", base_url="http://127.0.0.1:9")
    )
    assert added.status_code == 200 and "https://" in added.content.decode()
    model.refresh_from_db()
    assert model.base_url == f"http://{MODEL_HOST}:8000" and services.model_api_key(model).endswith(STORED_VALUES[0])
    assert not AsynchModel.objects.filter(model_name="other").exists()

    # The same origin keeps the key left blank; a new host takes the key entered with it.
    assert operator.post(change, _form(model, route="/v2")).status_code == 302
    assert services.model_api_key(AsynchModel.objects.get(pk=model.pk)).endswith(STORED_VALUES[0])
    assert (
        operator.post(change, _form(model, base_url=f"http://{ATTACKER_HOST}:8000", api_key="X-New:given")).status_code
        == 302
    )
    model.refresh_from_db()
    assert model.base_url == f"http://{ATTACKER_HOST}:8000" and services.model_api_key(model) == "X-New:given"
