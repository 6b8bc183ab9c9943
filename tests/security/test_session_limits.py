"""Refresh token reuse and operator sessions (contract section 10), against gunicorn:

- A thief replays a refresh token its owner already rotated: refused, and every token
  issued from it since (the owner's new refresh and access tokens) answers ``401``;
  the user's other logins (other families) are untouched.
- An admin session idle past ``ADMIN_SESSION_IDLE_MINUTES``, or older than
  ``ADMIN_SESSION_MAX_HOURS``, is logged out at its next request. Time passing is the
  session's stored times moved back, as the test process can reach the session store."""

from __future__ import annotations

import pytest
from django.contrib.sessions.backends.db import SessionStore

from config.admin_sessions import SEEN, STARTED
from tests.support.security.accounts import Admin, Client, error_of, module_server, pair, user_with_password

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

server = module_server(ADMIN_SESSION_IDLE_MINUTES="60", ADMIN_SESSION_MAX_HOURS="12")


def test_a_replayed_refresh_token_ends_its_whole_family(server):
    user_with_password("owen")
    owner = Client(server)
    stolen = pair(owner, "owen")  # the thief copies this pair
    elsewhere = pair(owner, "owen")  # the same learner on another device: another family

    rotated = owner.refresh(stolen["refresh"])  # the owner's app refreshes, as it should
    assert rotated.status_code == 200
    successor = rotated.json()
    assert owner.profile(successor["access"]).status_code == 200

    # The attack: the thief presents the rotated token.
    thief = Client(server, address=None).refresh(stolen["refresh"])
    assert thief.status_code == 401 and error_of(thief)["code"] == "UNAUTHORIZED", thief.text

    # Every token of the family since answers 401: the successor's refresh and access.
    assert owner.refresh(successor["refresh"]).status_code == 401
    dead = owner.profile(successor["access"])
    assert dead.status_code == 401 and error_of(dead)["code"] == "UNAUTHORIZED", dead.text
    # Another login of the same user is another family, and lives on.
    assert owner.profile(elsewhere["access"]).status_code == 200
    assert owner.refresh(elsewhere["refresh"]).status_code == 200
    # And a new login works.
    assert owner.profile(pair(owner, "owen")["access"]).status_code == 200


def test_a_logged_out_refresh_token_replayed_ends_nothing_else(server):
    user_with_password("lola")
    client = Client(server)
    first = pair(client, "lola")
    second = pair(client, "lola")
    assert client.logout(first["refresh"]).status_code == 204
    assert client.refresh(first["refresh"]).status_code == 401
    assert client.profile(second["access"]).status_code == 200


def _session_of(admin: Admin) -> SessionStore:
    return SessionStore(session_key=admin.session.cookies["sessionid"])


def _move_back(admin: Admin, **seconds: float) -> None:
    session = _session_of(admin)
    for key, back in (("started", seconds.get("started", 0)), ("seen", seconds.get("seen", 0))):
        name = STARTED if key == "started" else SEEN
        session[name] = float(session[name]) - back
    session.save()


def _logged_in(admin: Admin) -> bool:
    page = admin.session.get(f"{admin.url}/admin/", timeout=30, allow_redirects=False)
    if page.status_code == 302:
        assert "/admin/login/" in page.headers["Location"], page.headers
        return False
    assert page.status_code == 200, page.text[:1000]
    return True


def test_an_admin_session_idle_past_its_limit_is_logged_out(server):
    user_with_password("operator", is_staff=True, is_superuser=True)
    admin = Admin(server, "operator", "correct-horse-battery-9")
    assert _logged_in(admin)
    _move_back(admin, seen=59 * 60)  # idle a little under the hour: still in
    assert _logged_in(admin)
    _move_back(admin, seen=61 * 60)  # idle past it
    assert not _logged_in(admin)
    assert not _logged_in(admin)  # for good: the session is gone


def test_an_admin_session_ends_its_longest_after_login_however_busy(server):
    user_with_password("busy", is_staff=True, is_superuser=True)
    admin = Admin(server, "busy", "correct-horse-battery-9")
    assert _logged_in(admin)
    _move_back(admin, started=11 * 3600)
    assert _logged_in(admin)  # busy all along, under the maximum
    _move_back(admin, started=1 * 3600 + 60)  # twelve hours and a minute after its login
    assert not _logged_in(admin)
