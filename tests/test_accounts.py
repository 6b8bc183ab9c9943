"""Accounts: registration, JWTs that name the opaque public id, and the
throttle on /auth/* per client IP and per pair of username and client IP."""

from __future__ import annotations

import base64
import importlib
import json
import threading
from collections import Counter

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.test import APIClient

from accounts.models import Account
from accounts.selectors import public_id_of, user_with_account
from tests.support.api import error_code
from tests.support.factories import UserFactory

PASSWORD = "correct-horse-battery-9"


@pytest.fixture(autouse=True)
def _registration_on(settings):
    settings.ALLOW_REGISTRATION = True  # off by default; these tests register


def _register(client: APIClient, username: str, password: str = PASSWORD, **extra):
    return client.post("/auth/register", {"username": username, "password": password, **extra}, format="json")


def _claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


@pytest.mark.django_db
def test_register_creates_a_learner_named_by_an_opaque_id_with_tokens_that_work():
    client = APIClient()
    response = _register(client, "ada", email="ada@example.com")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"userId", "access", "refresh"}
    user = get_user_model().objects.get(username="ada")
    assert body["userId"] == public_id_of(user) and body["userId"].startswith("usr_")
    assert body["userId"] != str(user.pk)
    # The token names the user by the same opaque id, never the integer key.
    assert _claims(body["access"])["sub"] == body["userId"] and "user_id" not in _claims(body["access"])
    profile = client.get("/ai/profile", HTTP_AUTHORIZATION=f"Bearer {body['access']}")
    assert profile.status_code == 200 and profile.json()["userId"] == body["userId"]
    assert profile.json()["aiAnalysisEnabled"] is False  # a new learner has not consented yet
    refreshed = client.post("/auth/token/refresh", {"refresh": body["refresh"]}, format="json")
    assert refreshed.status_code == 200 and _claims(refreshed.json()["access"])["sub"] == body["userId"]
    login = client.post("/auth/token", {"username": "ada", "password": PASSWORD}, format="json")
    assert login.status_code == 200 and _claims(login.json()["access"])["sub"] == body["userId"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "password, says",
    [
        ("short1", "too short"),
        ("password123", "too common"),
        ("83749201938475", "entirely numeric"),
        ("adalovelace1", "similar"),
    ],
)
def test_register_applies_djangos_password_validators(password, says):
    response = _register(APIClient(), "adalovelace", password=password)
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    problems = response.json()["error"]["fields"]["password"]
    assert any(says in problem for problem in problems), problems
    assert not get_user_model().objects.filter(username="adalovelace").exists()


@pytest.mark.django_db
def test_a_taken_username_is_a_validation_error_on_username_whatever_its_case():
    UserFactory(username="grace")
    for name in ("grace", "Grace"):
        response = _register(APIClient(), name)
        assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
        assert set(response.json()["error"]["fields"]) == {"username"}
    assert get_user_model().objects.filter(username__iexact="grace").count() == 1


@pytest.mark.django_db
def test_a_bad_username_or_email_is_named_in_fields():
    response = _register(APIClient(), "no spaces!", email="not-an-email")
    assert response.status_code == 400 and set(response.json()["error"]["fields"]) == {"username", "email"}


@pytest.mark.django_db
def test_registration_turned_off_answers_forbidden(settings):
    settings.ALLOW_REGISTRATION = False
    response = _register(APIClient(), "hopper")
    assert response.status_code == 403 and error_code(response) == "FORBIDDEN"
    assert not get_user_model().objects.filter(username="hopper").exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_registrations_of_one_username_make_one_user():
    barrier = threading.Barrier(8)
    statuses: list[int] = []

    def register() -> None:
        try:
            barrier.wait()
            statuses.append(_register(APIClient(), "lovelace").status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=register) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert Counter(statuses) == {201: 1, 400: 7}
    assert get_user_model().objects.filter(username="lovelace").count() == 1


@pytest.mark.django_db
def test_wrong_passwords_are_throttled_per_username_and_address_never_per_username_alone(settings, monkeypatch):
    settings.AUTH_THROTTLE_RATE = "10/min"
    monkeypatch.setattr("quotas.throttles.clock", lambda: 1_800_000_030.0)  # mid-window: no boundary to cross
    UserFactory(username="turing")
    guesser = APIClient(REMOTE_ADDR="10.0.0.1")
    answers = [
        guesser.post("/auth/token", {"username": "turing", "password": "guess"}, format="json") for _ in range(12)
    ]
    assert [a.status_code for a in answers[:10]] == [401] * 10
    assert all(a.status_code == 429 and error_code(a) == "RATE_LIMITED" for a in answers[10:])
    assert 1 <= int(answers[-1]["Retry-After"]) <= 61
    # The same name in another case is the same name.
    shouted = guesser.post("/auth/token", {"username": "TURING", "password": "x"}, format="json")
    assert shouted.status_code == 429
    # From another address the name is not held back: a guesser cannot lock turing out.
    elsewhere = APIClient(REMOTE_ADDR="10.0.0.2").post(
        "/auth/token", {"username": "turing", "password": "guess"}, format="json"
    )
    assert elsewhere.status_code == 401


@pytest.mark.django_db
def test_auth_endpoints_are_throttled_per_client_ip_across_usernames(settings, monkeypatch):
    settings.AUTH_ADDRESS_THROTTLE_RATE = "10/min"
    monkeypatch.setattr("quotas.throttles.clock", lambda: 1_800_000_030.0)  # mid-window: no boundary to cross
    client = APIClient(REMOTE_ADDR="192.0.2.7")
    paths = ["/auth/token", "/auth/register", "/auth/token/refresh"]
    answers = [
        client.post(paths[n % 3], {"username": f"name{n}", "password": "x", "refresh": "x"}, format="json")
        for n in range(12)
    ]
    assert all(a.status_code != 429 for a in answers[:10])
    assert [a.status_code for a in answers[10:]] == [429, 429]
    # Another address is not held back by this one.
    elsewhere = APIClient(REMOTE_ADDR="192.0.2.8").post(
        "/auth/token", {"username": "x", "password": "y"}, format="json"
    )
    assert elsewhere.status_code == 401


@pytest.mark.django_db
def test_a_refresh_token_of_a_deleted_user_is_unauthorized_not_a_server_error():
    client = APIClient()
    body = _register(client, "dijkstra").json()
    get_user_model().objects.filter(username="dijkstra").delete()
    response = client.post("/auth/token/refresh", {"refresh": body["refresh"]}, format="json")
    assert response.status_code == 401 and error_code(response) == "UNAUTHORIZED"
    stale = client.get("/ai/profile", HTTP_AUTHORIZATION=f"Bearer {body['access']}")
    assert stale.status_code == 401


@pytest.mark.django_db
def test_every_user_has_a_public_id_however_made_and_the_migration_backfills_old_ones():
    made = UserFactory()
    superuser = get_user_model().objects.create_superuser("root", password="pw")
    assert Account.objects.filter(user__in=[made, superuser]).count() == 2
    # Users from before accounts existed: the migration gives each one, dated when they joined.
    Account.objects.filter(user__in=[made, superuser]).delete()
    migration = importlib.import_module("accounts.migrations.0001_initial")
    migration.backfill(apps, None)
    ids = dict(Account.objects.values_list("user_id", "public_id"))
    assert set(ids) >= {made.pk, superuser.pk} and len(set(ids.values())) == len(ids)
    assert all(public_id.startswith("usr_") and len(public_id) == 30 for public_id in ids.values())


def _jobs_with(token: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.get("/ai/jobs").status_code


@pytest.mark.django_db
def test_a_token_checked_once_vouches_for_no_other_text_and_not_past_its_expiry():
    """Each process checks an access token's signature once (accounts.api.tokens): the
    same text again is trusted until it expires, and nothing else is."""
    import datetime
    import time

    from accounts.api.tokens import AccessToken

    token = AccessToken.for_user(UserFactory())
    # Expiry is whole seconds: 3 s from now leaves at least 2 for the checks before it.
    token.set_exp(lifetime=datetime.timedelta(seconds=3))
    text = str(token)
    assert _jobs_with(text) == 200
    assert _jobs_with(text) == 200  # the check this process made
    head, body, signature = text.split(".")
    forged = ".".join([head, body, signature[:-2] + ("AA" if signature[-2:] != "AA" else "BB")])
    assert _jobs_with(forged) == 401
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    other_body = base64.urlsafe_b64encode(json.dumps({**claims, "sub": "usr_someone_else"}).encode()).rstrip(b"=")
    assert _jobs_with(".".join([head, other_body.decode(), signature])) == 401  # its signature on other claims
    time.sleep(max(0.0, token["exp"] - time.time()) + 0.2)
    assert _jobs_with(text) == 401  # expired, though checked before


@pytest.mark.django_db
def test_the_user_a_token_names_is_read_with_its_account_field_for_field():
    made = UserFactory(email="ann@example.com")
    made.refresh_from_db()
    found = user_with_account(public_id_of(made))
    assert found is not None
    for model, expected, got in ((get_user_model(), made, found), (Account, made.account, found.account)):
        fields = model._meta.concrete_fields
        assert {f.attname: getattr(got, f.attname) for f in fields} == {
            f.attname: getattr(expected, f.attname) for f in fields
        }
    assert user_with_account("usr_nobody") is None
