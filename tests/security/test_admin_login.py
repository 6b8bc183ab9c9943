"""Password guessing at ``/admin/login/``, from outside against gunicorn behind one
proxy (``NUM_PROXIES=1``): after ``ADMIN_LOGIN_FAILURE_LIMIT`` (5) failed logins for a
username from one address, that pair is refused for ``ADMIN_LOGIN_COOLOFF_MINUTES``
(15), the right password included, with a ``429`` page of the admin's saying so. The
lock is the pair's alone: another username from that address and the same username from
another address log in. The username counts as login reads it (in any case and width,
without surrounding whitespace); the address is the one the proxy saw, whatever a
client writes in ``X-Forwarded-For`` before it. ``/auth/token`` is neither counted nor
locked (it has its own throttles)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from axes.models import AccessAttempt
from django.db.models import F

from tests.support.ops import Gunicorn
from tests.support.security.admin import PASSWORD, AdminSession, admin_gunicorn, logged_in, staff

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ATTACKER, ELSEWHERE = "203.0.113.10", "198.51.100.20"
WRONG = "not the password"


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Gunicorn]:  # type: ignore[no-untyped-def]
    with admin_gunicorn(tmp_path_factory.mktemp("admin-login") / "gunicorn.log") as running:
        yield running


def fail(session: AdminSession, username: str, times: int) -> list[int]:
    return [session.login(username, WRONG).status_code for _ in range(times)]


def assert_refused(response: requests.Response, *, minutes: int = 15) -> None:
    assert response.status_code == 429, response.text[:1000]
    assert "Too many failed logins" in response.text and "even with the right password" in response.text
    assert '<div id="site-name"><a href="/admin/">AI job platform</a></div>' in response.text  # the admin's look
    assert 0 < int(response.headers["Retry-After"]) <= minutes * 60
    assert "sessionid" not in response.cookies


def test_five_failures_lock_that_username_from_that_address_and_no_one_else(server: Gunicorn):
    staff("root", superuser=True)
    staff("other", superuser=True)
    attacker = AdminSession(server, address=ATTACKER)
    # Four are the form's "enter a correct username and password"; the fifth locks the pair.
    assert fail(attacker, "root", 5) == [200, 200, 200, 200, 429]
    assert_refused(attacker.login("root", PASSWORD))
    assert not attacker.logged_in()
    # A client cannot step aside by writing an address before the one the proxy appends.
    forged = AdminSession(server, address=f"{ELSEWHERE}, {ATTACKER}")
    assert_refused(forged.login("root", PASSWORD))

    assert logged_in(server, "other", address=ATTACKER).logged_in()  # another account, same address
    assert logged_in(server, "root", address=ELSEWHERE).logged_in()  # the same account, elsewhere


def test_a_username_is_counted_as_login_reads_it(server: Gunicorn):
    staff("root", superuser=True)
    attacker = AdminSession(server, address=ATTACKER)
    for name in ("root", " root", "ROOT", "\uff52\uff4f\uff4f\uff54", "Root\t"):  # the fourth: full-width
        attacker.login(name, WRONG)
    assert_refused(attacker.login("root", PASSWORD))
    assert set(AccessAttempt.objects.values_list("username", flat=True)) == {"root"}


def test_the_lock_lasts_the_cooloff_from_the_last_failure(server: Gunicorn):
    staff("root", superuser=True)
    attacker = AdminSession(server, address=ATTACKER)
    fail(attacker, "root", 5)
    attempts = AccessAttempt.objects.filter(username="root")
    attempts.update(attempt_time=F("attempt_time") - dt.timedelta(minutes=14))
    assert_refused(attacker.login("root", PASSWORD))  # tries while locked do not extend it...
    attempts.update(attempt_time=F("attempt_time") - dt.timedelta(minutes=1, seconds=1))
    assert logged_in(server, "root", address=ATTACKER).logged_in()  # ...and after 15 minutes it is over


def test_the_api_login_is_neither_counted_nor_locked(server: Gunicorn):
    staff("root", superuser=True)

    def token(password: str) -> int:
        return requests.post(
            f"{server.url}/auth/token",
            json={"username": "root", "password": password},
            headers={"X-Forwarded-For": ATTACKER},
            timeout=30,
        ).status_code

    assert [token(WRONG) for _ in range(6)] == [401] * 6
    assert not AccessAttempt.objects.exists()
    assert logged_in(server, "root", address=ATTACKER).logged_in()  # the API's failures did not count

    fail(AdminSession(server, address=ATTACKER), "root", 5)
    assert_refused(AdminSession(server, address=ATTACKER).login("root", PASSWORD))
    assert token(PASSWORD) == 200  # the admin's lock is the admin's


def test_the_limit_and_the_cooloff_are_settings(tmp_path: Path):
    staff("root", superuser=True)
    env = {"ADMIN_LOGIN_FAILURE_LIMIT": "2", "ADMIN_LOGIN_COOLOFF_MINUTES": "1"}
    with admin_gunicorn(tmp_path / "gunicorn.log", env=env) as server:
        attacker = AdminSession(server, address=ATTACKER)
        assert fail(attacker, "root", 2) == [200, 429]
        assert_refused(attacker.login("root", PASSWORD), minutes=1)
        AccessAttempt.objects.update(attempt_time=F("attempt_time") - dt.timedelta(seconds=61))
        assert logged_in(server, "root", address=ATTACKER).logged_in()
