"""Support for the budget's black-box tests: gunicorn serving the test database with
the settings a test names, and a learner signed in to it over HTTP.

Tests that use a server need ``@pytest.mark.django_db(transaction=True)``, so that
gunicorn sees their rows."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection

from tests.support.ops import gunicorn

PASSWORD = "budget-abuse-pw-31"
RUNTIME = {"Authorization": "Bearer ops-runtime-token-for-the-test-servers", "x-runtime-instance-id": "budget-runtime"}


def module_server(**env: str):  # type: ignore[no-untyped-def]
    """A module's fixture: gunicorn on the test database (PostgreSQL) with ``env`` on
    top of the operations tests' settings (throttles out of the way unless named); its URL."""

    @pytest.fixture(scope="module")
    def server(
        django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[str]:
        with django_db_blocker.unblock():
            if connection.vendor != "postgresql":
                pytest.skip("gunicorn serves the test database on PostgreSQL")
        log = tmp_path_factory.mktemp("gunicorn") / "gunicorn.log"
        with gunicorn(log, workers=2, env={"SECRET_KEY": settings.SECRET_KEY, "LOG_LEVEL": "WARNING", **env}) as up:
            yield up.url

    return server


class Learner:
    """A user signed in to ``url`` through ``POST /auth/token``, with a session that
    sends their access token. Their id is drawn at random: the throttles' windows, kept
    in Redis, outlive the test database, and must not be a previous run's user's."""

    def __init__(self, url: str) -> None:
        self.url = url
        # Hashed as the server hashes (the test process's settings use a faster hasher).
        password = PBKDF2PasswordHasher().encode(PASSWORD, "budgetsaltsalt", iterations=1000)
        user_id = random.randrange(10**8, 2 * 10**9)
        self.user = get_user_model().objects.create(id=user_id, username=f"learner{user_id}", password=password)
        self.session = requests.Session()
        login = self.session.post(f"{url}/auth/token", json={"username": self.user.username, "password": PASSWORD})
        assert login.status_code == 200, login.text
        self.session.headers["Authorization"] = f"Bearer {login.json()['access']}"

    def get(self, path: str) -> requests.Response:
        return self.session.get(self.url + path, timeout=30)

    def post(self, path: str, body: dict[str, Any]) -> requests.Response:
        return self.session.post(self.url + path, json=body, timeout=30)

    def patch(self, path: str, body: dict[str, Any]) -> requests.Response:
        return self.session.patch(self.url + path, json=body, timeout=30)

    def job(self) -> requests.Response:
        return self.post("/ai/jobs", {"jobType": "learning_state_analysis", "targetType": "user", "targetId": "me"})


def code(response: requests.Response) -> str:
    return response.json()["error"]["code"]
