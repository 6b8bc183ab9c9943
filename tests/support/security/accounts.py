"""Support for the accounts' black-box tests: gunicorn serving the test database with
the settings a test names, an HTTP client of the user API that says which client
address a reverse proxy in front would report (``X-Forwarded-For``, for a server with
``NUM_PROXIES=1``), Django admin driven through its own forms, and users whose
passwords gunicorn checks quickly.

Tests that use a server need ``@pytest.mark.django_db(transaction=True)``, so that
gunicorn sees their rows."""

from __future__ import annotations

import base64
import html
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection

from tests.support.ops import gunicorn

PASSWORD = "correct-horse-battery-9"
ROOT = Path(__file__).resolve().parents[3]


@contextmanager
def accounts_server(log: Path, **env: str) -> Iterator[str]:
    """gunicorn on the test database with ``env`` on top of the operations tests'
    settings (throttles out of the way unless ``env`` names them); its URL. It signs
    tokens with the test process's ``SECRET_KEY``, so a test can make one of its own."""
    with gunicorn(log, workers=2, env={"SECRET_KEY": settings.SECRET_KEY, "LOG_LEVEL": "WARNING", **env}) as server:
        yield server.url


def module_server(**env: str):  # type: ignore[no-untyped-def]
    """A module's fixture ``server``: ``accounts_server`` with ``env``, on PostgreSQL."""

    @pytest.fixture(scope="module")
    def server(
        django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[str]:
        with django_db_blocker.unblock():
            if connection.vendor != "postgresql":
                pytest.skip("gunicorn serves the test database on PostgreSQL")
        with accounts_server(tmp_path_factory.mktemp("gunicorn") / "gunicorn.log", **env) as url:
            yield url

    return server


class _QuickPBKDF2(PBKDF2PasswordHasher):
    # Django's own algorithm with few rounds: gunicorn checks it as any PBKDF2 hash.
    iterations = 1000


def user_with_password(username: str, password: str = PASSWORD, **fields: Any):  # type: ignore[no-untyped-def]
    """A user that gunicorn can log in (the suite's own hasher is MD5, which the server
    does not list)."""
    hasher = _QuickPBKDF2()
    return get_user_model().objects.create(username=username, password=hasher.encode(password, hasher.salt()), **fields)


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def error_of(response: requests.Response) -> dict[str, Any]:
    """The API's error body: ``{"error": {"code", "message", "retryable"}}``."""
    body = response.json()
    assert set(body) == {"error"} and {"code", "message", "retryable"} <= set(body["error"]), body
    return body["error"]


@dataclass
class Client:
    """The user API as one client sees it; ``address``: the client address the proxy
    in front reports in ``X-Forwarded-For`` (none: a direct connection)."""

    url: str
    address: str | None = None

    def headers(self, access: str | None = None) -> dict[str, str]:
        headers = {"X-Forwarded-For": self.address} if self.address else {}
        if access:
            headers["Authorization"] = f"Bearer {access}"
        return headers

    def post(self, path: str, body: Any, *, access: str | None = None) -> requests.Response:
        return requests.post(self.url + path, json=body, headers=self.headers(access), timeout=60)

    def register(self, username: str, password: str = PASSWORD) -> requests.Response:
        return self.post("/auth/register", {"username": username, "password": password})

    def login(self, username: str, password: str = PASSWORD) -> requests.Response:
        return self.post("/auth/token", {"username": username, "password": password})

    def refresh(self, refresh: str) -> requests.Response:
        return self.post("/auth/token/refresh", {"refresh": refresh})

    def logout(self, refresh: str) -> requests.Response:
        return self.post("/auth/logout", {"refresh": refresh})

    def change_password(self, access: str, old: str, new: str) -> requests.Response:
        return self.post("/auth/password", {"oldPassword": old, "newPassword": new}, access=access)

    def profile(self, access: str) -> requests.Response:
        return requests.get(self.url + "/ai/profile", headers=self.headers(access), timeout=60)


def pair(client: Client, username: str, password: str = PASSWORD) -> dict[str, str]:
    """A fresh login's ``{"access", "refresh"}``."""
    response = client.login(username, password)
    assert response.status_code == 200, response.text
    return response.json()


def start_of_a_window(period: int, *, margin: float = 15.0) -> None:
    """Wait, if need be, until at least ``margin`` seconds are left in the throttles'
    current fixed window of ``period`` seconds, so a test's requests fall in one."""
    while period - time.time() % period < margin:
        time.sleep(0.5)


class Admin:
    """Django admin through its own forms, as a staff member's browser posts them."""

    def __init__(self, url: str, username: str, password: str) -> None:
        self.url = url
        self.session = requests.Session()
        page = self.session.get(f"{url}/admin/login/", timeout=30)
        response = self.session.post(
            f"{url}/admin/login/?next=/admin/",
            data={"csrfmiddlewaretoken": _csrf(page.text), "username": username, "password": password},
            timeout=60,
        )
        assert response.url.rstrip("/").endswith("/admin"), response.text[:2000]

    def form(self, path: str) -> dict[str, str]:
        """The fields of the admin form at ``path`` as the page fills them in."""
        page = self.session.get(self.url + path, timeout=30)
        assert page.status_code == 200, page.text[:2000]
        return form_fields(page.text)

    def submit(self, path: str, changes: dict[str, str], *, drop: tuple[str, ...] = ()) -> requests.Response:
        """Post the form at ``path`` with ``changes`` (a checkbox in ``drop`` unticked)."""
        data = {key: value for key, value in self.form(path).items() if key not in drop}
        return self.session.post(self.url + path, data={**data, **changes}, timeout=60, allow_redirects=False)


def _csrf(page: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert found, page[:2000]
    return found.group(1)


def form_fields(page: str) -> dict[str, str]:
    """The values a browser would post of a Django admin form: inputs (a checkbox only
    when checked), selected options, textareas."""
    fields: dict[str, str] = {}
    for tag in re.findall(r"<input\b[^>]*>", page):
        name = re.search(r'\bname="([^"]+)"', tag)
        if not name:
            continue
        kind = (re.search(r'\btype="([^"]+)"', tag) or re.search("()", "")).group(1)
        if kind in ("checkbox", "radio") and " checked" not in tag:
            continue
        if kind == "submit":
            continue
        value = re.search(r'\bvalue="([^"]*)"', tag)
        fields[name.group(1)] = html.unescape(value.group(1)) if value else ("on" if kind == "checkbox" else "")
    for name, body in re.findall(r'<select\b[^>]*\bname="([^"]+)"[^>]*>(.*?)</select>', page, re.S):
        selected = re.search(r'<option value="([^"]*)"[^>]*\bselected\b', body)
        if selected:
            fields[name] = html.unescape(selected.group(1))
    for name, body in re.findall(r'<textarea\b[^>]*\bname="([^"]+)"[^>]*>(.*?)</textarea>', page, re.S):
        fields[name] = html.unescape(body.strip())
    return fields
