"""Real servers for the reference runtime's end-to-end tests: the stand-in model in
a thread, gunicorn in a subprocess pointed at pytest-django's test database, and
runtimes as threads (``Runtime``) or processes (``manage.py run_runtime``).

Import the fixtures into a test module; its tests need
``@pytest.mark.django_db(transaction=True)`` so the server sees their rows."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from django.db import connection

from runtime_worker.config import RuntimeConfig
from runtime_worker.runner import Runtime
from runtime_worker.standin import StandinServer

ROOT = Path(__file__).resolve().parents[2]
E2E_TOKEN = "e2e-runtime-token-of-the-end-to-end-tests"
PLATFORM_KEY = "sk-e2e-platform-secret-key-0123456789"
LEASE_SECONDS = 2
HEARTBEAT_SECONDS = 0.25
GUNICORN = [
    sys.executable,
    "-m",
    "gunicorn",
    "config.wsgi",
    "--workers",
    "2",
    "--threads",
    "8",
    "--log-level",
    "warning",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(condition: Callable[[], Any], *, timeout: float = 60.0, every: float = 0.05, what: str = "") -> Any:
    """Poll until ``condition()`` is truthy; a bound on a hang, not a timing claim."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what or condition}")
        time.sleep(every)


def database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture(scope="module")
def standin() -> Iterator[StandinServer]:
    server = StandinServer().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _no_leftover_faults(request: pytest.FixtureRequest) -> None:
    if "standin" in request.fixturenames:
        model = request.getfixturevalue("standin").model
        model.clear_faults()
        model.stats.clear()


def server_env(standin: StandinServer, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DB_CONN_MAX_AGE": "60",
        "RUNTIME_SERVICE_TOKENS": E2E_TOKEN,
        "AI_JOB_LOCK_SECONDS": str(LEASE_SECONDS),
        "AI_JOB_RETRY_BACKOFF_BASE_SECONDS": "0.05",
        "AI_JOB_RETRY_BACKOFF_MAX_SECONDS": "0.2",
        "RUNTIME_THROTTLE_RATE": "10000000/min",
        "USER_THROTTLE_RATE": "10000000/min",
        "AUTH_THROTTLE_RATE": "10000000/min",
        "AUTH_ADDRESS_THROTTLE_RATE": "10000000/min",
        "AUTH_FAILURE_THROTTLE_RATE": "10000000/min",
        "CREDENTIAL_TEST_THROTTLE_RATE": "10000000/min",
        "PLATFORM_DEEPSEEK_API_KEY": PLATFORM_KEY,
        "DEEPSEEK_BASE_URL": standin.base_url,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "LOG_LEVEL": "WARNING",
    }
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def api_server(
    django_db_setup: None, django_db_blocker: Any, standin: StandinServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """gunicorn serving the project on the test database; yields its base URL."""
    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            pytest.skip("the end-to-end runtime tests need PostgreSQL")
        env = server_env(standin)
    with serve_api(env, tmp_path_factory.mktemp("gunicorn") / "gunicorn.log") as url:
        yield url


@contextlib.contextmanager
def serve_api(env: dict[str, str], log: Path) -> Iterator[str]:
    """gunicorn with ``env`` (``server_env``'s), ready; its base URL."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*GUNICORN, "--bind", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"gunicorn exited: {log.read_text()[-3000:]}")
        try:
            response = requests.post(
                f"{url}/internal/runtime/jobs/poll",
                json={"capabilities": ["learning_state_analysis"], "limit": 1},
                headers={"Authorization": f"Bearer {E2E_TOKEN}"},
                timeout=2,
            )
        except requests.RequestException:
            return False
        return response.status_code == 200

    try:
        wait_for(ready, timeout=60, every=0.2, what="gunicorn")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


class FlakyProxy(ThreadingHTTPServer):
    """An HTTP proxy to the API that misbehaves on cue, for the calls whose path
    ends with a suffix: ``"502"`` answers 502 itself (the API is down behind it),
    ``"drop_before"`` closes the connection without forwarding, ``"drop_after"``
    forwards the call and closes the connection instead of relaying the answer."""

    daemon_threads = True

    def __init__(self, upstream: str, rules: list[tuple[str, str]]) -> None:
        self.upstream = upstream
        self.rules = list(rules)
        self.seen: list[tuple[str, str, int | None]] = []
        self._lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        threading.Thread(target=self.serve_forever, name="flaky-proxy", daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def take_rule(self, path: str) -> str | None:
        with self._lock:
            for index, (suffix, action) in enumerate(self.rules):
                if path.endswith(suffix):
                    del self.rules[index]
                    return action
        return None

    def calls(self, suffix: str) -> list[tuple[str, str, int | None]]:
        return [call for call in self.seen if call[1].endswith(suffix)]


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FlakyProxy

    def log_message(self, *args: Any) -> None:
        pass

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        action = self.server.take_rule(self.path)
        if action == "drop_before":
            self.server.seen.append((self.command, self.path, None))
            return self._drop()
        if action == "502":
            self.server.seen.append((self.command, self.path, 502))
            self.send_response(502)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")}
        answer = requests.request(
            self.command, self.server.upstream + self.path, data=body, headers=headers, timeout=30
        )
        self.server.seen.append((self.command, self.path, None if action == "drop_after" else answer.status_code))
        if action == "drop_after":
            return self._drop()
        self.send_response(answer.status_code)
        self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)
        return None

    do_GET = do_POST = _forward


def runtime_config(api_url: str, instance_id: str, **overrides: Any) -> RuntimeConfig:
    values: dict[str, Any] = {
        "api_url": api_url,
        "token": E2E_TOKEN,
        "instance_id": instance_id,
        "concurrency": 4,
        "heartbeat_seconds": HEARTBEAT_SECONDS,
        "poll_interval_ms": 50,
        "grace_seconds": 5.0,
        "final_report_seconds": 5.0,
        "submit_retry_seconds": 10.0,
    }
    values.update(overrides)
    return RuntimeConfig(**values)


@pytest.fixture
def start_runtime(api_server: str) -> Iterator[Callable[..., Runtime]]:
    """Start in-process runtimes (threads); all are stopped after the test."""
    started: list[Runtime] = []

    def start(instance_id: str, **overrides: Any) -> Runtime:
        runtime = Runtime(runtime_config(overrides.pop("api_url", api_server), instance_id, **overrides))
        runtime.start()
        started.append(runtime)
        return runtime

    yield start
    for runtime in started:
        runtime.abort_now()
    for runtime in started:
        runtime.stop(timeout=15)


def spawn_runtime(
    api_url: str, instance_id: str, log: Path, *, concurrency: int = 4, grace: float = 5.0
) -> subprocess.Popen[bytes]:
    """A runtime as a real process: ``python manage.py run_runtime``."""
    env = {
        **os.environ,
        "RUNTIME_API_URL": api_url,
        "RUNTIME_SERVICE_TOKEN": E2E_TOKEN,
        "RUNTIME_INSTANCE_ID": instance_id,
        "RUNTIME_CONCURRENCY": str(concurrency),
        "RUNTIME_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS),
        "RUNTIME_POLL_INTERVAL_MS": "50",
        "LOG_LEVEL": "INFO",
    }
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "manage.py", "run_runtime", "--grace-seconds", str(grace)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
