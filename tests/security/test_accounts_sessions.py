"""Sessions of the user API, tried against gunicorn as a thief holding a copy of a
token would: a refresh rotates and the refresh token it was given never
works again, not even raced by eight clients at once; a logout kills the refresh token;
a password change (by the learner, or set by an operator in Django admin) and a
deactivation end every access and refresh token issued before; a deleted user's tokens
are refused with the API's error body; a token that carries no digest of the
password (one issued before tokens did) is refused."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from rest_framework_simplejwt.tokens import AccessToken as PlainAccessToken

from accounts.selectors import public_id_of
from tests.support.security.accounts import (
    PASSWORD,
    Admin,
    Client,
    claims,
    error_of,
    module_server,
    pair,
    user_with_password,
)

pytestmark = pytest.mark.django_db(transaction=True)

NEW_PASSWORD = "another-horse-battery-7"

server = module_server(ALLOW_REGISTRATION="true")


def token_rows(model: str):  # type: ignore[no-untyped-def]
    """simplejwt's blacklist tables, where used-up refresh tokens are kept."""
    return apps.get_model("token_blacklist", model).objects


def refused(response) -> bool:  # type: ignore[no-untyped-def]
    return response.status_code == 401 and error_of(response)["code"] == "UNAUTHORIZED"


def test_a_refresh_rotates_and_the_refresh_token_it_was_given_never_works_again(server):
    client = Client(server)
    registered = client.register("mallory-victim")
    assert registered.status_code == 201, registered.text
    first = registered.json()
    second = client.refresh(first["refresh"])
    assert second.status_code == 200, second.text
    rotated = second.json()
    assert set(rotated) == {"access", "refresh"} and rotated["refresh"] != first["refresh"]
    assert claims(rotated["refresh"])["sub"] == first["userId"]
    third = client.refresh(rotated["refresh"])  # the new one works, once
    assert third.status_code == 200 and client.profile(third.json()["access"]).status_code == 200
    assert refused(client.refresh(first["refresh"]))  # used up, for good (and its family with it:
    assert refused(client.refresh(first["refresh"]))  # test_session_limits.py)
    assert refused(client.refresh(third.json()["refresh"]))
    # The table keeps what refuses a token, never a token itself.
    assert not token_rows("OutstandingToken").exclude(token="").exists()


def test_eight_clients_racing_one_refresh_token_get_one_new_pair(server):
    user_with_password("oscar")
    refresh = pair(Client(server), "oscar")["refresh"]
    barrier = threading.Barrier(8)
    statuses: list[int] = []

    def use() -> None:
        barrier.wait()
        statuses.append(Client(server).refresh(refresh).status_code)

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert Counter(statuses) == {200: 1, 401: 7}
    assert token_rows("BlacklistedToken").count() == 1


def test_a_logout_kills_its_refresh_token(server):
    user_with_password("peggy")
    client = Client(server)
    tokens, other = pair(client, "peggy"), pair(client, "peggy")
    out = client.logout(tokens["refresh"])
    assert out.status_code == 204 and out.content == b""
    assert refused(client.refresh(tokens["refresh"]))
    assert refused(client.logout(tokens["refresh"]))  # dead already
    assert client.refresh(other["refresh"]).status_code == 200  # another session of hers lives on
    for junk in ["not-a-token", tokens["access"]]:  # an access token is no refresh token
        assert refused(client.logout(junk))
    missing = client.post("/auth/logout", {})
    assert missing.status_code == 400 and set(error_of(missing)["fields"]) == {"refresh"}


def test_a_password_change_ends_every_token_issued_before(server):
    user_with_password("quentin")
    client = Client(server)
    sessions = [pair(client, "quentin") for _ in range(2)]
    rotated = client.refresh(sessions[1]["refresh"]).json()
    sessions.append(rotated)
    access = sessions[0]["access"]

    wrong = client.change_password(access, "not-my-password", NEW_PASSWORD)
    assert wrong.status_code == 400 and error_of(wrong)["code"] == "VALIDATION_ERROR"
    assert set(wrong.json()["error"]["fields"]) == {"oldPassword"}
    weak = client.change_password(access, PASSWORD, "12345678")
    assert weak.status_code == 400 and set(weak.json()["error"]["fields"]) == {"newPassword"}
    assert refused(Client(server).change_password("", PASSWORD, NEW_PASSWORD))  # no access token
    assert all(client.profile(s["access"]).status_code == 200 for s in sessions)  # nothing changed yet

    changed = client.change_password(access, PASSWORD, NEW_PASSWORD)
    assert changed.status_code == 204 and changed.content == b""
    for session in sessions:
        assert refused(client.profile(session["access"]))
        assert refused(client.refresh(session["refresh"]))
    assert refused(client.change_password(access, NEW_PASSWORD, PASSWORD))
    assert client.login("quentin", PASSWORD).status_code == 401
    fresh = pair(client, "quentin", NEW_PASSWORD)
    assert client.profile(fresh["access"]).status_code == 200


def test_an_operator_who_sets_a_password_in_django_admin_or_deactivates_a_user_ends_their_tokens(server):
    user_with_password("operator", is_staff=True, is_superuser=True)
    rupert = user_with_password("rupert")
    client = Client(server)
    tokens = pair(client, "rupert")
    admin = Admin(server, "operator", PASSWORD)
    done = admin.submit(
        f"/admin/auth/user/{rupert.pk}/password/",
        {"usable_password": "true", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
    )
    assert done.status_code == 302, done.text[:3000]
    assert refused(client.profile(tokens["access"]))
    assert refused(client.refresh(tokens["refresh"]))
    assert client.profile(pair(client, "rupert", NEW_PASSWORD)["access"]).status_code == 200

    sybil = user_with_password("sybil")
    tokens = pair(client, "sybil")
    get_user_model().objects.filter(pk=sybil.pk).update(is_active=False)  # the admin's "Active" unticked
    assert refused(client.profile(tokens["access"]))
    assert refused(client.refresh(tokens["refresh"]))
    assert client.login("sybil").status_code == 401
    # Made active again in the admin: her tokens from before stay dead, a new login works.
    saved = admin.submit(f"/admin/auth/user/{sybil.pk}/change/", {"is_active": "on"})
    assert saved.status_code == 302, saved.text[:3000]
    assert get_user_model().objects.get(pk=sybil.pk).is_active
    assert refused(client.profile(tokens["access"]))
    assert refused(client.refresh(tokens["refresh"]))
    assert client.profile(pair(client, "sybil")["access"]).status_code == 200


def test_a_deleted_users_tokens_are_refused_with_the_error_body(server):
    trent = user_with_password("trent")
    client = Client(server)
    tokens = pair(client, "trent")
    assert client.refresh(pair(client, "trent")["refresh"]).status_code == 200  # a used-up token of his
    trent.delete()
    assert not token_rows("OutstandingToken").exists()  # his token rows went with him
    assert refused(client.profile(tokens["access"]))
    assert refused(client.refresh(tokens["refresh"]))
    assert refused(client.logout(tokens["refresh"]))


def test_a_token_without_the_password_digest_is_refused(server):
    """Signed with the server's key and naming a real user, but without the claim
    every token now carries: what a token issued before the claim looks like."""
    victor = user_with_password("victor")
    bare = PlainAccessToken()
    bare["sub"] = public_id_of(victor)
    client = Client(server)
    assert refused(client.profile(str(bare)))
    assert client.profile(pair(client, "victor")["access"]).status_code == 200
