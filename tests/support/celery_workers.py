"""Real Celery worker processes (``celery -A config worker`` subprocesses on the Redis
broker of the test run, against the test database), and the message that wakes them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery
from django.conf import settings
from django.db import connection

from tests.support.runtime_fixtures import ROOT, database_url


@pytest.fixture
def needs_postgres_and_redis(settings) -> None:
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.skip("needs PostgreSQL and REDIS_URL (make test sets both)")
    settings.ASYNCH_SEMAPHORE_REDIS_URL = settings.REDIS_URL


class Workers:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, **env: str) -> subprocess.Popen[bytes]:
        environment = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": database_url(),
            "DB_CONN_MAX_AGE": "0",
            "REDIS_URL": settings.REDIS_URL,
            "CELERY_BROKER_URL": settings.REDIS_URL,
            "VAR_DIR": str(self.tmp_path),
            "ASYNCH_WORKER_CONCURRENCY": "4",
            "ASYNCH_WORKER_POLL_INTERVAL": "0.1",
            "LOG_LEVEL": "WARNING",
            **env,
        }
        log = open(self.tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "threads", "--concurrency", "2",
             "-n", f"{name}@%h", "--loglevel", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.processes[name] = process
        return process

    def wait_ready(self, timeout: float = 40) -> None:
        deadline = time.monotonic() + timeout
        for name, process in self.processes.items():
            while b" ready." not in (self.tmp_path / f"{name}.log").read_bytes():
                assert process.poll() is None, (self.tmp_path / f"{name}.log").read_text()
                assert time.monotonic() < deadline, f"worker {name} did not start"
                time.sleep(0.1)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(name="workers")
def workers_fixture(tmp_path: Path) -> Iterator[Workers]:
    started = Workers(tmp_path)
    yield started
    started.stop()


def kick(times: int = 1) -> None:
    """Wake the workers the way createTask and beat do: an ``asynch.tasks.work`` message."""
    app = Celery("asynch-test", set_as_current=False)  # the shared tasks stay the project app's
    # The URL is passed explicitly: CELERY_BROKER_URL in the environment (memory://
    # under make test) would win over a configured broker.
    with app.connection_for_write(settings.REDIS_URL) as conn:
        for _ in range(times):
            app.send_task("asynch.tasks.work", connection=conn)
    app.close()


def dispatch_deliveries() -> None:
    """What beat sends every ``DELIVERY_DISPATCH_INTERVAL_SECONDS``: the outbox's due
    retries, sent by whichever worker takes the message."""
    app = Celery("delivery-test", set_as_current=False)
    with app.connection_for_write(settings.REDIS_URL) as conn:
        app.send_task("delivery.tasks.dispatch", connection=conn)
    app.close()
