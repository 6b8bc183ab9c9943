"""The user's model credentials through HTTP, the provider test
against a local stand-in, and the runtime's resolve of a user key."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from credentials import selectors, services
from credentials.models import Credential, CredentialStatus
from tests.support.api import RuntimeClient, error_code
from tests.support.credentials import (  # noqa: F401  (fixtures)
    API_KEY,
    client_for,
    encryption_keys_fixture,
    make_credential,
    provider_fixture,
    provider_server_fixture,
    url,
)
from tests.support.factories import JobFactory, UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.embedded, pytest.mark.usefixtures("encryption_keys")]

CREDENTIAL_FIELDS = {
    "id",
    "name",
    "provider",
    "baseUrl",
    "maskedKey",
    "status",
    "lastTestedAt",
    "lastTestResult",
    "createdAt",
    "updatedAt",
}


# --- create, read, list -----------------------------------------------------------------


def test_create_answers_201_with_a_mask_and_never_the_key(user, settings):
    response = client_for(user).post(url(), {"name": "Work key", "apiKey": API_KEY}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == CREDENTIAL_FIELDS
    assert body["id"].startswith("cred_") and body["name"] == "Work key" and body["provider"] == "deepseek"
    assert body["maskedKey"] == "sk-****abcd" and body["status"] == "active"
    assert body["baseUrl"] == settings.DEEPSEEK_BASE_URL
    assert body["lastTestedAt"] is None and body["lastTestResult"] is None
    assert API_KEY not in response.content.decode()
    row = Credential.objects.get(id=body["id"])
    assert row.user_id == user.pk and row.key_id == "k1" and len(bytes(row.nonce)) == 12
    assert API_KEY.encode() not in bytes(row.ciphertext)
    assert services.credential_resolve(user_id=user.pk, credential_id=row.id).api_key == API_KEY


def test_name_and_provider_are_optional_and_a_short_key_is_masked_without_its_tail(user):
    response = client_for(user).post(url(), {"apiKey": "sk-short123"}, format="json")
    assert response.status_code == 201
    assert response.json()["maskedKey"] == "sk-****" and response.json()["name"] == "DeepSeek key"


def test_list_is_paginated_newest_first_with_only_the_users_live_credentials(user):
    now = timezone.now()
    mine = [make_credential(user, name=f"key {i}") for i in range(3)]
    for i, credential in enumerate(mine):
        Credential.objects.filter(id=credential.id).update(created_at=now - dt.timedelta(minutes=10 - i))
    services.credential_delete(credential=make_credential(user, name="gone"))
    make_credential(UserFactory(), name="someone else's")
    client = client_for(user)
    first = client.get(url(), {"limit": 2}).json()
    assert [c["name"] for c in first["results"]] == ["key 2", "key 1"] and first["next"]
    second = client.get(url(), {"limit": 2, "cursor": first["next"]}).json()
    assert [c["name"] for c in second["results"]] == ["key 0"] and second["next"] is None
    assert client.get(url(mine[0].id)).json()["name"] == "key 0"


def test_unauthenticated_calls_answer_401(user):
    credential = make_credential(user)
    anonymous = APIClient()
    for response in (
        anonymous.get(url()),
        anonymous.get(url(credential.id)),
        anonymous.post(url(credential.id, "test")),
    ):
        assert response.status_code == 401 and error_code(response) == "UNAUTHORIZED"


# --- update and delete ---------------------------------------------------------------------


def test_put_renames_without_touching_the_sealed_key(user):
    credential = make_credential(user)
    before = Credential.objects.get(id=credential.id)
    response = client_for(user).put(url(credential.id), {"name": "Renamed"}, format="json")
    assert response.status_code == 200 and response.json()["name"] == "Renamed"
    after = Credential.objects.get(id=credential.id)
    assert bytes(after.nonce) == bytes(before.nonce) and bytes(after.ciphertext) == bytes(before.ciphertext)


def test_a_new_key_value_is_sealed_afresh_and_its_status_and_test_start_over(user):
    credential = make_credential(user)
    Credential.objects.filter(id=credential.id).update(
        status=CredentialStatus.INVALID, last_tested_at=timezone.now(), last_test_ok=False, last_test_http_status=401
    )
    before = Credential.objects.get(id=credential.id)
    new_key = "sk-replacement000000000000000wxyz"
    response = client_for(user).put(url(credential.id), {"apiKey": new_key}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["maskedKey"] == "sk-****wxyz" and body["status"] == "active" and body["lastTestResult"] is None
    assert new_key not in response.content.decode()
    after = Credential.objects.get(id=credential.id)
    assert bytes(after.nonce) != bytes(before.nonce) and bytes(after.ciphertext) != bytes(before.ciphertext)
    assert services.credential_resolve(user_id=user.pk, credential_id=credential.id).api_key == new_key
    # PATCH is accepted as well, with the same meaning.
    assert client_for(user).patch(url(credential.id), {"name": "p"}, format="json").json()["name"] == "p"


def test_delete_is_soft_wipes_the_sealed_key_and_the_credential_is_gone_everywhere(user):
    credential = make_credential(user)
    client = client_for(user)
    response = client.delete(url(credential.id))
    assert response.status_code == 204
    row = Credential.objects.get(id=credential.id)
    assert row.deleted_at is not None and row.status == "deleted"
    assert row.key_id == "" and bytes(row.ciphertext) == b"" and bytes(row.nonce) == b""
    assert client.get(url(credential.id)).status_code == 404
    assert client.delete(url(credential.id)).status_code == 404
    assert client.get(url()).json()["results"] == []
    assert selectors.credential_get_for_user(user=user, credential_id=credential.id) is None


# --- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "apiKey"),
        ({"apiKey": ""}, "apiKey"),
        ({"apiKey": "sk-1"}, "apiKey"),
        ({"apiKey": "sk-secret with-space-0000000000"}, "apiKey"),
        ({"apiKey": "sk-" + "x" * 600}, "apiKey"),
        ({"apiKey": True}, "apiKey"),
        ({"apiKey": API_KEY, "name": "n" * 101}, "name"),
        ({"apiKey": API_KEY, "name": "   "}, "name"),
        ({"apiKey": API_KEY, "provider": "openai"}, "provider"),
    ],
)
def test_bad_bodies_answer_400_validation_error_naming_the_field_and_never_echo_the_key(user, body, field):
    response = client_for(user).post(url(), body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and field in error["fields"] and error["retryable"] is False
    if isinstance(body.get("apiKey"), str) and body["apiKey"]:
        assert body["apiKey"] not in response.content.decode()
    assert not Credential.objects.exists()


def test_non_json_and_non_object_bodies_answer_400(user):
    client = client_for(user)
    credential = make_credential(user)
    for response in (
        client.post(url(), "not json", content_type="application/json"),
        client.post(url(), ["a", "list"], format="json"),
        client.put(url(credential.id), {"apiKey": "bad key"}, format="json"),
    ):
        assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"


# --- owner scoping ------------------------------------------------------------------------


def test_another_users_credential_answers_404_on_every_endpoint_exactly_as_a_missing_one(user, provider):
    theirs = make_credential(UserFactory())
    client = client_for(user)
    calls = [
        ("get", None, ""),
        ("put", {"name": "mine now", "apiKey": "sk-hijack00000000000000000000000"}, ""),
        ("patch", {"name": "mine now"}, ""),
        ("delete", None, ""),
        ("post", None, "test"),
    ]
    for method, body, action in calls:
        other = getattr(client, method)(url(theirs.id, action), body, format="json")
        missing = getattr(client, method)(url("cred_missing", action), body, format="json")
        assert other.status_code == missing.status_code == 404, (method, action)
        assert (
            other.json()
            == missing.json()
            == {"error": {"code": "CREDENTIAL_NOT_FOUND", "message": "Credential not found", "retryable": False}}
        )
    assert provider.seen == []
    row = Credential.objects.get(id=theirs.id)
    assert row.name == "My key" and row.deleted_at is None
    assert services.credential_resolve(user_id=theirs.user_id, credential_id=theirs.id).api_key == API_KEY


def test_selector_returns_none_for_missing_deleted_and_another_users_credential(user):
    mine, theirs, gone = make_credential(user), make_credential(UserFactory()), make_credential(user)
    services.credential_delete(credential=gone)
    assert selectors.credential_get_for_user(user=user, credential_id=mine.id) == mine
    for credential_id in (theirs.id, gone.id, "cred_missing", ""):
        assert selectors.credential_get_for_user(user=user, credential_id=credential_id) is None


# --- the provider test ------------------------------------------------------------------------


def test_the_test_calls_the_providers_model_list_with_the_key(user, provider):
    credential = make_credential(user)
    response = client_for(user).post(url(credential.id, "test"))
    assert response.status_code == 200
    assert response.json() == {"ok": True, "httpStatus": 200, "message": "The provider accepted the key."}
    assert provider.seen == [("/models", f"Bearer {API_KEY}")]
    body = client_for(user).get(url(credential.id)).json()
    assert body["status"] == "active" and body["lastTestedAt"]
    assert body["lastTestResult"] == {"ok": True, "httpStatus": 200, "message": "The provider accepted the key."}


def test_a_401_marks_the_key_invalid_a_500_leaves_the_status_and_a_200_makes_it_active_again(user, provider):
    credential = make_credential(user)
    client = client_for(user)
    provider.status = 401
    body = client.post(url(credential.id, "test")).json()
    assert body["ok"] is False and body["httpStatus"] == 401
    assert client.get(url(credential.id)).json()["status"] == "invalid"
    provider.status = 500
    body = client.post(url(credential.id, "test")).json()
    assert body == {"ok": False, "httpStatus": 500, "message": "The provider answered HTTP 500."}
    detail = client.get(url(credential.id)).json()
    assert detail["status"] == "invalid" and detail["lastTestResult"]["httpStatus"] == 500
    provider.status = 200
    assert client.post(url(credential.id, "test")).json()["ok"] is True
    assert client.get(url(credential.id)).json()["status"] == "active"


def test_an_unreachable_or_slow_provider_answers_ok_false_without_an_http_status(user, provider, settings):
    credential = make_credential(user)
    client = client_for(user)
    settings.DEEPSEEK_BASE_URL = "http://127.0.0.1:9"  # nothing listens on discard
    body = client.post(url(credential.id, "test")).json()
    assert body["ok"] is False and body["httpStatus"] is None and "reach" in body["message"]
    settings.DEEPSEEK_BASE_URL = provider.url
    settings.CREDENTIAL_TEST_TIMEOUT_SECONDS = 0.2
    provider.delay = 1.0
    body = client.post(url(credential.id, "test")).json()
    assert body["ok"] is False and body["httpStatus"] is None and "0.2 seconds" in body["message"]
    assert Credential.objects.get(id=credential.id).status == "active"


# --- the runtime's resolve ---------------------------------------------------------------------


def _locked_job(runtime: RuntimeClient, **fields):
    job = JobFactory(api_key_mode="user_deepseek_key", **fields)
    assert runtime.lock(job.id).status_code == 200
    return job


def test_the_lock_holder_resolves_the_users_decrypted_key(runtime, other_runtime, user, settings):
    credential = make_credential(user)
    job = _locked_job(runtime, user=user, credential_id=credential.id)
    response = runtime.post(f"jobs/{job.id}/credential")
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    assert response.json() == {
        "apiKeyMode": "user_deepseek_key",
        "provider": "deepseek",
        "baseUrl": settings.DEEPSEEK_BASE_URL,
        "modelName": job.model_name,
        "apiKey": API_KEY,
    }
    refused = other_runtime.post(f"jobs/{job.id}/credential")
    assert refused.status_code == 409 and error_code(refused) == "JOB_NOT_ACTIVE"
    assert API_KEY not in refused.content.decode()


def test_resolve_of_a_deleted_or_another_users_credential_is_not_found(runtime, user):
    gone = make_credential(user)
    services.credential_delete(credential=gone)
    theirs = make_credential(UserFactory())
    for credential_id in (gone.id, theirs.id, "cred_missing"):
        job = _locked_job(runtime, user=user, credential_id=credential_id)
        response = runtime.post(f"jobs/{job.id}/credential")
        assert response.status_code == 404 and error_code(response) == "CREDENTIAL_NOT_FOUND"
    job = _locked_job(runtime, user=user)
    assert error_code(runtime.post(f"jobs/{job.id}/credential")) == "CREDENTIAL_REQUIRED"


# --- the admin --------------------------------------------------------------------------------


def test_admin_shows_the_mask_adds_nothing_and_deletes_softly_through_the_service(user):
    credential = make_credential(user)
    admin = Client()
    admin.force_login(UserFactory(is_staff=True, is_superuser=True))
    page = admin.get(f"/admin/credentials/credential/{credential.id}/change/").content.decode()
    assert "sk-****abcd" in page and "ciphertext" not in page.lower() and "nonce" not in page.lower()
    assert admin.get("/admin/credentials/credential/add/").status_code == 403
    action = {"action": "soft_delete_credentials", "_selected_action": [credential.id]}
    assert admin.post("/admin/credentials/credential/", action, follow=True).status_code == 200
    row = Credential.objects.get(id=credential.id)
    assert row.deleted_at is not None and bytes(row.ciphertext) == b""
