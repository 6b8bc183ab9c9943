"""Usernames, tried as an attacker would: every spelling of a name that
normalizes to it (Unicode NFKC, surrounding whitespace, any case) is one account, on
the wire and in Django admin; racing registrations of two spellings make one account,
because the database refuses the second; the spellings share one throttle count.
Against gunicorn on PostgreSQL; the database's own rule on SQLite too (``embedded``)."""

from __future__ import annotations

import importlib
import threading
from collections import Counter

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction
from rest_framework.test import APIClient

from accounts import services
from accounts.models import Account
from accounts.selectors import public_id_of
from tests.support.security.accounts import (
    PASSWORD,
    Admin,
    Client,
    claims,
    error_of,
    module_server,
    start_of_a_window,
    user_with_password,
)

pytestmark = pytest.mark.django_db(transaction=True)

SPELLINGS = [" alice", "alice\t", "\u3000alice", "ALICE", "\uff21LICE", "Alice "]  # \uff21: fullwidth A

server = module_server(ALLOW_REGISTRATION="true", NUM_PROXIES="1")


def test_every_spelling_of_a_taken_name_is_refused_and_logs_in_to_the_one_account(server):
    client = Client(server)
    made = client.register("alice")
    assert made.status_code == 201, made.text
    alice = made.json()["userId"]
    for spelling in SPELLINGS:
        again = client.register(spelling)
        assert again.status_code == 400, (spelling, again.text)
        assert error_of(again)["code"] == "VALIDATION_ERROR" and set(again.json()["error"]["fields"]) == {"username"}
        login = client.login(spelling)
        assert login.status_code == 200, (spelling, login.text)
        assert claims(login.json()["access"])["sub"] == alice
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["alice"]
    # What is stored is the name normalized, in the case its owner chose.
    made = client.register("\u3000\uff22ob\t")
    assert made.status_code == 201, made.text
    assert sorted(get_user_model().objects.values_list("username", flat=True)) == ["Bob", "alice"]


def test_racing_registrations_of_two_spellings_make_one_account(server):
    """Eight clients at once, four spellings of one name: the unique key in the
    database, not the check before the insert, lets exactly one through."""
    names = ["carol", "CAROL", "\uff23arol", " Carol"] * 2
    barrier = threading.Barrier(len(names))
    answers: list[tuple[int, set[str]]] = []

    def register(n: int) -> None:
        barrier.wait()
        response = Client(server, address=f"198.51.100.{n + 1}").register(names[n])
        fields = set(response.json()["error"].get("fields", {})) if response.status_code != 201 else set()
        answers.append((response.status_code, fields))

    threads = [threading.Thread(target=register, args=(n,)) for n in range(len(names))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert Counter(status for status, _ in answers) == {201: 1, 400: 7}, answers
    assert all(fields == {"username"} for status, fields in answers if status == 400), answers
    assert get_user_model().objects.count() == 1


strict = module_server(ALLOW_REGISTRATION="true", NUM_PROXIES="1", AUTH_THROTTLE_RATE="5/min")


def test_the_spellings_of_a_name_share_one_throttle_count(strict):
    """Five wrong passwords from one address, each in another spelling: the sixth try
    from there, right password and all, is held back like the fifth's next."""
    user_with_password("dave")
    start_of_a_window(60)
    spellings = ["dave", " dave", "dave\t", "\u3000dave", "DAVE"]
    guesser = Client(strict, address="203.0.113.1")
    for spelling in spellings:
        wrong = guesser.login(spelling, "not-the-password")
        assert wrong.status_code == 401, (spelling, wrong.text)
    held = guesser.login("\uff24AVE")
    assert held.status_code == 429 and error_of(held)["code"] == "RATE_LIMITED", held.text
    assert 1 <= int(held.headers["Retry-After"]) <= 61


def test_the_admin_cannot_add_or_rename_a_user_to_a_taken_name(server):
    user_with_password("operator", is_staff=True, is_superuser=True)
    user_with_password("erin")
    bob = user_with_password("bob")
    admin = Admin(server, "operator", PASSWORD)

    for spelling in ["ERIN", "\uff25rin", " erin\t"]:
        added = admin.submit(
            "/admin/auth/user/add/",
            {"username": spelling, "usable_password": "true", "password1": PASSWORD, "password2": PASSWORD},
        )
        assert added.status_code == 200 and "already exists" in added.text, (spelling, added.text[:3000])
    renamed = admin.submit(f"/admin/auth/user/{bob.pk}/change/", {"username": "Erin"})
    assert renamed.status_code == 200 and "already exists" in renamed.text, renamed.text[:3000]
    assert sorted(get_user_model().objects.values_list("username", flat=True)) == ["bob", "erin", "operator"]

    # What a form stores is the normalized name, and its key follows a rename.
    added = admin.submit(
        "/admin/auth/user/add/",
        {"username": "\u3000\uff26rank ", "usable_password": "true", "password1": PASSWORD, "password2": PASSWORD},
    )
    assert added.status_code == 302, added.text[:3000]
    assert admin.submit(f"/admin/auth/user/{bob.pk}/change/", {"username": " Robert\t"}).status_code == 302
    assert get_user_model().objects.filter(username__in=["Frank", "Robert"]).count() == 2
    # The old name is free again, the new one taken in every spelling.
    assert Client(server).register("BOB").status_code == 201
    assert Client(server).register("ROBERT").status_code == 400


@pytest.mark.embedded
def test_the_database_itself_refuses_a_second_account_for_one_name():
    """On PostgreSQL and on SQLite (the embedded default): whatever skips the checks
    (the ORM, a race), the unique key refuses the second account."""
    get_user_model().objects.create_user("grace", password="x")
    for spelling in ["GRACE", "\uff27race", "Grace"]:
        with pytest.raises(IntegrityError), transaction.atomic():
            get_user_model().objects.create_user(spelling, password="x")
    assert get_user_model().objects.count() == 1


@pytest.mark.embedded
def test_createsuperuser_and_the_orm_outside_a_transaction_take_no_taken_name(monkeypatch):
    """Outside a transaction a user's row would be written before its key: a taken name
    is refused before the row exists, and ``createsuperuser`` says so as an error."""
    get_user_model().objects.create_user("judy", password="x")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", PASSWORD)
    with pytest.raises(CommandError, match="already exists"):
        call_command("createsuperuser", "--noinput", "--username", "JUDY", "--email", "judy@example.com")
    with pytest.raises(IntegrityError):
        get_user_model().objects.create_user("\uff2audy", password="x")  # autocommit, no transaction
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["judy"]
    assert not get_user_model().objects.filter(account__isnull=True).exists()


def test_a_save_that_lost_the_race_for_a_name_outside_a_transaction_leaves_no_user(monkeypatch):
    """Two saves of two spellings at once both pass the check before the insert; the
    key refuses the second, whose row, written already in autocommit, goes again."""
    get_user_model().objects.create_user("kim", password="x")
    monkeypatch.setattr(services, "username_taken", lambda *args, **kwargs: False)  # the check raced and lost
    with pytest.raises(IntegrityError):
        get_user_model().objects.create_user("KIM", password="x")
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["kim"]


def test_threads_saving_two_spellings_outside_a_transaction_make_one_account():
    for n in range(8):
        start = threading.Barrier(2)

        def save(name: str, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                get_user_model().objects.create_user(name, password="x")
            except IntegrityError:
                pass
            finally:
                connection.close()

        threads = [threading.Thread(target=save, args=(name,)) for name in (f"lee{n}", f"LEE{n}")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert get_user_model().objects.filter(username__iexact=f"lee{n}").count() == 1, n
    assert not get_user_model().objects.filter(account__isnull=True).exists()


@pytest.mark.embedded
def test_registration_and_login_on_the_embedded_default(settings):
    settings.ALLOW_REGISTRATION = True
    client = APIClient()
    made = client.post("/auth/register", {"username": "heidi", "password": PASSWORD}, format="json")
    assert made.status_code == 201
    for spelling in SPELLINGS:
        name = spelling.replace("alice", "heidi").replace("ALICE", "HEIDI").replace("\uff21LICE", "\uff28EIDI")
        name = name.replace("Alice", "Heidi")
        taken = client.post("/auth/register", {"username": name, "password": PASSWORD}, format="json")
        assert taken.status_code == 400 and set(taken.json()["error"]["fields"]) == {"username"}, name
        login = client.post("/auth/token", {"username": name, "password": PASSWORD}, format="json")
        assert login.status_code == 200 and claims(login.json()["access"])["sub"] == made.json()["userId"], name


@pytest.mark.embedded
def test_accounts_that_already_shared_a_name_keep_logging_in_and_the_oldest_keeps_the_key():
    """An existing database may hold ``ivan`` and ``Ivan`` (made before keys, in the
    admin): the migration keeps the key for the oldest, the younger one logs in with
    its exact name, and nobody is renamed or locked out."""
    ivan = get_user_model().objects.create_user("ivan", password="pw-ivan-1")
    Account.objects.filter(user=ivan).update(username_key=None)
    younger = get_user_model().objects.create_user("Ivan", password="pw-ivan-2")
    Account.objects.update(username_key=None)
    importlib.import_module("accounts.migrations.0003_backfill_username_key").backfill(apps, None)
    assert dict(Account.objects.values_list("user_id", "username_key")) == {ivan.pk: "ivan", younger.pk: None}

    client = APIClient()
    for name, password, who in [
        ("Ivan", "pw-ivan-2", younger),
        ("IVAN", "pw-ivan-1", ivan),
        ("ivan", "pw-ivan-1", ivan),
    ]:
        login = client.post("/auth/token", {"username": name, "password": password}, format="json")
        assert login.status_code == 200 and claims(login.json()["access"])["sub"] == public_id_of(who), name
    # Saving the younger one (a password set in the admin, say) leaves it as it is.
    younger.set_password("pw-ivan-3")
    younger.save()
    assert Account.objects.get(user=younger).username_key is None
    # Renamed to a free name, it gets that name's key.
    younger.username = "ivan2"
    younger.save()
    assert Account.objects.get(user=younger).username_key == "ivan2"
