"""Helpers for the operations tests: reading a Prometheus scrape, a private
redis-server that a test may stop, and gunicorn serving the test database."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.support.runtime_fixtures import ROOT, database_url, free_port, wait_for

# The metrics table of docs/operations/metrics.md. name: (type, labels); a counter's family is named without ``_total``.
DOCUMENTED_METRICS = {
    "aijobs_queue_jobs": ("gauge", {"status", "job_type"}),
    "aijobs_queue_oldest_pending_seconds": ("gauge", {"job_type"}),
    "aijobs_leases_lapsed": ("gauge", set()),
    "aijobs_jobs_finished": ("counter", {"status", "job_type", "error_code"}),
    "aijobs_runtimes_active": ("gauge", set()),
    "aijobs_breaker_state": ("gauge", {"state"}),
    "aijobs_platform_tokens_today": ("gauge", set()),
    "aijobs_platform_cost_cents_today": ("gauge", set()),
    "aijobs_model_tokens": ("counter", {"api_key_mode"}),
    "aijobs_http_requests": ("counter", {"api", "status"}),
    "aijobs_http_request_duration_seconds": ("histogram", {"api"}),
    "aijobs_notifications_failed": ("counter", set()),
    "aijobs_pushes": ("counter", {"platform", "outcome"}),
    "asynch_tasks": ("gauge", {"state", "model_name"}),
    "asynch_model_calls": ("counter", {"model_name", "outcome"}),
    "asynch_semaphore_in_use": ("gauge", {"model_name"}),
    "aijobs_job_type_paused": ("gauge", {"job_type"}),
}


@dataclass
class Scrape:
    """A parsed ``/metrics``: family types and label names, and every sample."""

    types: dict[str, str] = field(default_factory=dict)
    labels: dict[str, set[str]] = field(default_factory=dict)
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> Scrape:
        scrape = cls()
        for family in text_string_to_metric_families(text):
            scrape.types[family.name] = family.type
            names = scrape.labels.setdefault(family.name, set())
            for sample in family.samples:
                names.update(key for key in sample.labels if key != "le")
                scrape.samples.append((sample.name, dict(sample.labels), sample.value))
        return scrape

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
        return sum(
            value
            for sample, found, value in self.samples
            if sample == name and all(found.get(k) == v for k, v in labels.items())
        )

    def has(self, name: str) -> bool:
        return any(sample == name for sample, _, _ in self.samples)


class PrivateRedis:
    """A redis-server of the test's own on a free port, to stop and start at will."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed"
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.2)
        wait_for(lambda: _pings(client), timeout=10, what="redis-server")
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@dataclass
class Gunicorn:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return requests.get(self.url + path, timeout=10, **kwargs)


@contextlib.contextmanager
def gunicorn(log: Path, *, workers: int = 3, env: dict[str, str] | None = None) -> Iterator[Gunicorn]:
    """gunicorn with the project's config (``config/gunicorn.py``) on the test database,
    its access log on; every line it and Django write goes to ``log``."""
    port = free_port()
    full_env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "RUNTIME_SERVICE_TOKENS": "ops-runtime-token-for-the-test-servers",
        "RUNTIME_THROTTLE_RATE": "10000000/min",
        "USER_THROTTLE_RATE": "10000000/min",
        "AUTH_THROTTLE_RATE": "10000000/min",
        "AUTH_ADDRESS_THROTTLE_RATE": "10000000/min",
        "AUTH_FAILURE_THROTTLE_RATE": "10000000/min",
        "CREDENTIAL_TEST_THROTTLE_RATE": "10000000/min",
        "CELERY_TASK_ALWAYS_EAGER": "true",
        "METRICS_FLUSH_SECONDS": "0.2",
        "LOG_LEVEL": "INFO",
        **(env or {}),
    }
    full_env = {key: value for key, value in full_env.items() if value is not None and value != "<unset>"}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi", "-c", "config/gunicorn.py", "--bind",
             f"127.0.0.1:{port}", "--workers", str(workers), "--threads", "2", "--access-logfile", "-"],
            cwd=ROOT, env=full_env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = Gunicorn(url=f"http://127.0.0.1:{port}", process=process, log=log)

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"gunicorn exited: {log.read_text()[-3000:]}")
        try:
            return requests.get(server.url + "/healthz", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    try:
        wait_for(ready, timeout=60, every=0.2, what="gunicorn")
        yield server
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def admin_session(url: str, username: str, password: str) -> requests.Session:
    """A session logged in to the admin of the server at ``url``, as a browser would."""
    session = requests.Session()
    session.get(f"{url}/admin/login/", timeout=10)
    answer = session.post(
        f"{url}/admin/login/?next=/admin/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": session.cookies["csrftoken"]},
        headers={"Referer": f"{url}/admin/login/"},
        timeout=10,
    )
    assert answer.status_code == 200 and "Log out" in answer.text, answer.text[:500]
    return session


def settle(seconds: float = 0.5) -> None:
    """Let every worker flush its buffered counters (METRICS_FLUSH_SECONDS is 0.2 here)."""
    time.sleep(seconds)
