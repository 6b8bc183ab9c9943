"""Helpers for the egress and download security tests: a recording HTTP server (an
attacker's, or a model service that answers what a test tells it), live gunicorn on the
test database with its own ``ASYNCH_ALLOWED_MODEL_HOSTS``, a tenant's HTTP client for
it, the project's worker drain run in the test process, and chromium.

Servers bind to addresses of their own on the loopback network (the whole of
127.0.0.0/8 is this machine's): the model service on ``MODEL_HOST``, the attacker on
``ATTACKER_HOST``; the hosts the tests list never include 127.0.0.1, so that address
stands for one the platform must refuse."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from django.db import connections

from asynch import services, worker
from asynch.models import AsynchTask, Tenant
from tests.support.browser import ARTIFACTS, browser_fixture  # noqa: F401  (the browser fixture)
from tests.support.ops import Gunicorn, gunicorn
from tests.support.runtime_fixtures import ROOT, wait_for

MODEL_HOST = "127.0.0.2"
ATTACKER_HOST = "127.0.0.3"
LISTED = f"{MODEL_HOST},{ATTACKER_HOST}"
# A key of header values, as an admin tenant stores it with a model config.
STORED_KEY = "API_KEY:sk-stored-model-secret-0123456789,X-Team:learning-secret-team"
STORED_VALUES = ("sk-stored-model-secret-0123456789", "learning-secret-team")


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def carries(self, value: str) -> bool:
        raw = json.dumps(self.headers) + self.path + self.body.decode(errors="replace")
        return value in raw


Answer = tuple[int, dict[str, str], bytes]


@dataclass
class RecordingServer:
    """A real HTTP server in a thread that records every connection it accepts and
    every request it reads (method, path, headers, body). ``answer(seen)`` says what it
    sends back; by default a small JSON body."""

    host: str
    answer: Callable[[Seen], Answer] | None = None
    seen: list[Seen] = field(default_factory=list)
    connections: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://{self.host}:{self.server.server_address[1]}"

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.server_address[1]

    def touched(self) -> bool:
        """Whether anything reached it at all: a connection, even one that sent no request."""
        return bool(self.connections or self.seen)

    def start(self) -> RecordingServer:
        recorder = self

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self):  # type: ignore[no-untyped-def]
                accepted = super().get_request()
                with recorder.lock:
                    recorder.connections += 1
                return accepted

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                seen = Seen(
                    self.command, self.path, dict(self.headers.items()), self.rfile.read(length) if length else b""
                )
                with recorder.lock:
                    recorder.seen.append(seen)
                status, headers, body = (
                    recorder.answer(seen) if recorder.answer else (200, {"Content-Type": "application/json"}, b"{}")
                )
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_HEAD = do_OPTIONS = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = Server((self.host, 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@contextlib.contextmanager
def recording(host: str, answer: Callable[[Seen], Answer] | None = None) -> Iterator[RecordingServer]:
    server = RecordingServer(host=host, answer=answer).start()
    try:
        yield server
    finally:
        server.stop()


def json_answer(body: Any, status: int = 200) -> Answer:
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


@contextlib.contextmanager
def live_api(var_dir: Path, *, allowed: str = LISTED, static: bool = False, **env: str) -> Iterator[Gunicorn]:
    """gunicorn on the test database listing ``allowed`` in ASYNCH_ALLOWED_MODEL_HOSTS.
    It runs no task itself (the test's drain does); its result files are under
    ``var_dir``/media, where the test process's storage must point too. ``static``:
    the admin's stylesheets collected first, for a browser to see the admin as it is."""
    if static:
        subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, check=True,
                       env={**os.environ, "VAR_DIR": str(var_dir), "DATABASE_URL": "sqlite://:memory:"})  # fmt: skip
    with gunicorn(
        var_dir / "gunicorn.log",
        workers=1,
        env={"ASYNCH_ALLOWED_MODEL_HOSTS": allowed, "ASYNCH_WORKER_ENABLED": "false", "VAR_DIR": str(var_dir), **env},
    ) as server:
        yield server


def module_api(django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory, **options: Any) -> Iterator[Gunicorn]:
    with django_db_blocker.unblock():
        if connections["default"].vendor != "postgresql":
            pytest.skip("the live API tests need PostgreSQL")
        var_dir = tmp_path_factory.mktemp("security-var")
        with live_api(var_dir, **options) as server:
            server.var_dir = var_dir  # type: ignore[attr-defined]
            yield server


@pytest.fixture(scope="module")
def api(django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gunicorn]:
    """One live API for a module; its tests need ``django_db(transaction=True)`` and the
    ``shared_var`` fixture."""
    yield from module_api(django_db_blocker, tmp_path_factory)


@pytest.fixture
def shared_var(api: Gunicorn, settings: Any) -> Path:
    """This process stores results where the live API serves them from, and lists the
    same hosts."""
    var_dir: Path = api.var_dir  # type: ignore[attr-defined]
    settings.MEDIA_ROOT = var_dir / "media"
    settings.VAR_DIR = var_dir
    settings.ASYNCH_SEMAPHORE_REDIS_URL = ""  # the file semaphore, under VAR_DIR
    settings.ASYNCH_ALLOWED_MODEL_HOSTS = LISTED.split(",")
    return var_dir


@dataclass
class TenantHttp:
    """A business service calling the live API with its X-Api-Key."""

    api: str
    tenant: Tenant
    key: str

    def post(self, path: str, body: Any, **headers: str) -> requests.Response:
        return requests.post(self.api + path, json=body, headers={"X-Api-Key": self.key, **headers}, timeout=30)

    def get(self, path: str, params: dict[str, Any] | None = None) -> requests.Response:
        return requests.get(self.api + path, params=params, headers={"X-Api-Key": self.key}, timeout=30)

    def create_model(self, model_name: str, base_url: str, **fields: Any) -> requests.Response:
        body = {"modelName": model_name, "baseUrl": base_url, "route": "/v1/chat", "apiKey": STORED_KEY,
                "timeoutSeconds": 5, "retryTimes": 1, "retryQueueMaxSeconds": 0, **fields}  # fmt: skip
        return self.post("/model/createModel", body)

    def create_task(self, model_name: str, payload: dict[str, Any] | None = None) -> str:
        response = self.post("/task/createTask", {"modelName": model_name, "requestPayload": payload or {"q": 1}})
        assert response.status_code == 201, response.text
        return response.json()["taskId"]

    def result(self, task_id: str) -> dict[str, Any]:
        response = self.get("/task/getTaskResult", {"taskId": task_id})
        assert response.status_code == 200, response.text
        return response.json()


def tenant_http(api: Gunicorn, name: str, *, is_admin: bool = False) -> TenantHttp:
    tenant = services.tenant_create(name=name, is_admin=is_admin)
    return TenantHttp(api=api.url, tenant=tenant, key=services.tenant_key_create(tenant=tenant).key)


def drain() -> dict[str, int]:
    """The project's worker drain (its call threads, claims, semaphore), in this process."""
    return dict(worker.tasks_drain(budget_seconds=30))


def task(task_id: str) -> AsynchTask:
    return AsynchTask.objects.get(id=task_id)


def error(response: requests.Response) -> dict[str, Any]:
    return response.json()["error"]


def wait_a_moment_for(server: RecordingServer, seconds: float = 0.5) -> None:
    """Give a request that would have been sent (a browser's, say) the time to arrive:
    a bound on how long we wait for nothing, since nothing is what must come."""
    with contextlib.suppress(AssertionError):
        wait_for(server.touched, timeout=seconds, every=0.05)
