"""Support for the admin's security tests, which go at the admin from outside as a
person (or an attacker holding a staff account) would: gunicorn serving the test
database as production runs it, behind one proxy (``NUM_PROXIES=1``); staff accounts
holding exactly the permissions a test names; a ``requests.Session`` that logs in
through ``/admin/login/`` and posts forms with the CSRF token of the page it read, as
a browser does; and a stand-in provider that records every request it receives."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import Permission

from tests.support.ops import Gunicorn, gunicorn
from tests.support.runtime_fixtures import ROOT

PASSWORD = "correct horse battery staple"
# The admin's Content-Security-Policy, directive by directive (the API docs add data: images).
POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}


def policy_of(header: str) -> dict[str, str]:
    """A ``Content-Security-Policy`` header's directives, by name."""
    return {name: value for name, _, value in (part.strip().partition(" ") for part in header.split(";"))}


_TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def _password_hash(password: str) -> str:
    # The test settings hash with MD5, which gunicorn's settings do not know: a hash its
    # own PBKDF2 hasher checks (few iterations: a test logs in often; Django upgrades it).
    return PBKDF2PasswordHasher().encode(password, PBKDF2PasswordHasher().salt(), iterations=1000)


def _permission(perm: str) -> Permission:
    app_label, codename = perm.split(".")
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


def staff(username: str, *perms: str, superuser: bool = False, password: str = PASSWORD):  # type: ignore[no-untyped-def]
    """A staff account holding exactly ``perms`` (``"app_label.codename"``)."""
    user = get_user_model().objects.create(
        username=username, is_staff=True, is_superuser=superuser, password=_password_hash(password)
    )
    user.user_permissions.add(*(_permission(perm) for perm in perms))
    return user


def view_only(username: str = "viewer", *also: str):  # type: ignore[no-untyped-def]
    """A staff account that may view every page and change nothing: every ``view_*``
    permission there is, and no other (but ``also``)."""
    user = staff(username, *also)
    user.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    return user


def collected_static(var_dir: Path) -> Path:
    """``collectstatic`` into ``var_dir`` (gunicorn, as in production, serves the
    collected files through WhiteNoise, not the apps' folders)."""
    env = {**os.environ, "VAR_DIR": str(var_dir)}
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    return var_dir


@contextlib.contextmanager
def admin_gunicorn(log: Path, *, env: dict[str, str] | None = None) -> Iterator[Gunicorn]:
    """gunicorn behind one trusted proxy, the model-asynch worker off (an admin action's
    kick would run it inside the request, eager Celery), the API throttles out of the way."""
    with gunicorn(log, workers=2, env={"NUM_PROXIES": "1", "ASYNCH_WORKER_ENABLED": "false", **(env or {})}) as server:
        yield server


class AdminSession:
    """One browser: its cookies, and the address the proxy in front says it has."""

    def __init__(self, server: Gunicorn, *, address: str = "203.0.113.10") -> None:
        self.base = server.url
        self.http = requests.Session()
        self.http.headers["X-Forwarded-For"] = address
        self.token = ""

    def get(self, path: str, **kwargs: object) -> requests.Response:
        response = self.http.get(self.base + path, timeout=30, allow_redirects=False, **kwargs)  # type: ignore[arg-type]
        found = _TOKEN.search(response.text)
        if found:
            self.token = found.group(1)
        return response

    def post(self, path: str, data: dict[str, object]) -> requests.Response:
        """A form posted with the CSRF token of the last page read (its cookie goes along)."""
        assert self.token, "no page with a form was read first"
        body = {"csrfmiddlewaretoken": self.token, **data}
        return self.http.post(self.base + path, data=body, timeout=30, allow_redirects=False)

    def login(self, username: str, password: str = PASSWORD) -> requests.Response:
        """The admin's login form: a redirect to the admin when it worked."""
        self.get("/admin/login/?next=/admin/")
        return self.post("/admin/login/?next=/admin/", {"username": username, "password": password, "next": "/admin/"})

    def logged_in(self) -> bool:
        return self.get("/admin/").status_code == 200

    def action(self, changelist: str, action: str, ids: list[str], **extra: object) -> requests.Response:
        """A changelist's action form, posted for the rows ``ids`` (the page read first,
        for its token, as a browser would have it)."""
        self.get(changelist)
        form = {"action": action, "_selected_action": ids, "index": 0, "select_across": 0, **extra}
        return self.post(changelist, form)


def logged_in(server: Gunicorn, username: str, *, address: str = "203.0.113.10") -> AdminSession:
    session = AdminSession(server, address=address)
    response = session.login(username)
    assert response.status_code == 302 and response.headers["Location"] == "/admin/", response.text[:2000]
    return session


class Recorder:
    """A stand-in HTTP server on 127.0.0.1 that answers 200 to everything and records
    each request's method, path and Authorization header."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                recorder.seen.append((self.command, self.path, self.headers.get("Authorization", "")))
                body = b'{"object": "list", "data": [{"id": "deepseek-chat"}]}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
