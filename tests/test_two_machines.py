"""Two machines in one test (docs/operations/production.md, Several machines): two web servers (gunicorn with
``-c config/gunicorn.py``, as Procfile.dev starts it) and two Celery workers, each pair
with its own ``VAR_DIR`` (no disk in common), sharing only what machines share in
production: one PostgreSQL (the test database), one Redis, one S3 bucket (moto's
server). A model-asynch task created through web A is run by either worker and
downloaded through web B; ``maxConcurrency`` holds across both workers, counted at
the model server; the user throttle holds across both web servers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection

from asynch.models import AsynchTask, TaskState
from tests.support.asynch_fixtures import make_model, model_server_fixture, tenant_client  # noqa: F401
from tests.support.runtime_fixtures import ROOT, database_url, free_port, wait_for
from tests.support.s3 import S3Server, start_s3_server

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

THROTTLE = 6  # requests a minute per user: USER_THROTTLE_RATE
MAX_CONCURRENCY = 3
TASKS = 30


@dataclass
class Machine:
    """One machine's processes: a web server and a Celery worker on its own VAR_DIR."""

    name: str
    var_dir: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self, role: str) -> Path:
        return self.var_dir / f"{role}.log"

    def _start(self, role: str, command: list[str]) -> None:
        with self.log(role).open("wb") as out:
            self.processes.append(
                subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT)
            )

    def start(self, *, beat: bool = False) -> Machine:
        self._start(
            "web",
            [sys.executable, "-m", "gunicorn", "config.wsgi", "-c", "config/gunicorn.py",
             "--bind", f"127.0.0.1:{self.port}", "--workers", "2", "--threads", "4", "--log-level", "warning"],
        )  # fmt: skip
        self._start(
            "worker",
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "threads", "--concurrency", "2",
             "-n", f"{self.name}@%h", "--loglevel", "INFO", "--without-gossip", "--without-mingle",
             "--without-heartbeat"],
        )  # fmt: skip
        if beat:  # exactly one beat for the whole deployment, as in production
            self._start("beat", [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "WARNING"])
        return self

    def ready(self) -> bool:
        for process in self.processes:
            if process.poll() is not None:
                raise AssertionError(f"{self.name} lost a process: {self.log('web').read_text()[-2000:]}"
                                     f"{self.log('worker').read_text()[-2000:]}")  # fmt: skip
        if b" ready." not in self.log("worker").read_bytes():
            return False
        try:
            return requests.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def s3(tmp_path: Path) -> Iterator[S3Server]:
    server = start_s3_server(tmp_path / "moto.log")
    yield server
    server.stop()


@pytest.fixture
def machines(tmp_path: Path, s3: S3Server) -> Iterator[tuple[Machine, Machine]]:
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.skip("needs PostgreSQL and REDIS_URL (make test sets both)")
    bucket = s3.create_bucket("results")
    shared = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DB_CONN_MAX_AGE": "0",
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_BROKER_URL": settings.REDIS_URL,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "DEPLOYMENT_MACHINES": "2",
        "USER_THROTTLE_RATE": f"{THROTTLE}/min",
        "ASYNCH_WORKER_CONCURRENCY": "2",  # two call threads a machine: neither takes all three slots
        "ASYNCH_WORKER_POLL_INTERVAL": "0.1",
        "LOG_LEVEL": "WARNING",
        **s3.settings(bucket),
    }
    started = []
    try:
        for name in ("machine-a", "machine-b"):
            var_dir = tmp_path / name
            var_dir.mkdir()
            # Beat polls the workers every ASYNCH_WORKER_POLL_INTERVAL: an idle worker joins
            # within one tick even when the busy one's "wake another" kick reached itself.
            machine = Machine(name, var_dir, {**shared, "VAR_DIR": str(var_dir)})
            started.append(machine.start(beat=name == "machine-a"))
        wait_for(lambda: all(machine.ready() for machine in started), timeout=60, every=0.2, what="both machines")
        yield started[0], started[1]
    finally:
        for machine in started:
            machine.stop()


def test_a_task_created_on_one_machine_runs_on_either_and_downloads_from_the_other(machines, s3, model_server):
    web_a, web_b = machines
    model_server.behaviour = lambda call, index: (200, {"n": call.json["n"], "answer": "ok"}, 0.3)
    make_model(base_url=model_server.url, max_concurrency=MAX_CONCURRENCY, queue_limit=0)
    biz = tenant_client("biz")
    key = {"X-Api-Key": biz.key}

    created = [
        requests.post(
            f"{web_a.url}/task/createTask", json={"modelName": "model-service", "requestPayload": {"n": n}}, headers=key
        )
        for n in range(TASKS)
    ]
    assert {response.status_code for response in created} == {201}
    ids = [response.json()["taskId"] for response in created]

    def states() -> Counter[int]:
        return Counter(
            requests.get(f"{web_b.url}/task/getTaskResult", params={"taskId": task_id}, headers=key).json()["state"]
            for task_id in ids
        )

    wait_for(lambda: states()[TaskState.SUCCEEDED] == TASKS, timeout=60, every=0.5, what="every task to succeed")

    # Every task downloads through the other machine, from the bucket.
    for n, task_id in enumerate(ids):
        oss_file = requests.get(f"{web_b.url}/task/getTaskResult", params={"taskId": task_id}, headers=key).json()[
            "ossFile"
        ]
        assert requests.get(oss_file, timeout=10).json() == {"n": n, "answer": "ok"}
    picked = requests.post(f"{web_b.url}/task/getTaskBatch", json={"taskIds": ids}, headers=key).json()["results"]
    assert {item["state"] for item in picked} == {TaskState.DOWNLOADED}
    assert len(s3.keys("results")) == TASKS

    # Both machines' workers ran tasks, each task once, never more than maxConcurrency at once.
    machine_of = {str(machine.processes[1].pid): machine.name for machine in machines}
    workers = Counter(
        machine_of[locked_by.split(":")[1]]
        for locked_by in AsynchTask.objects.filter(id__in=ids).values_list("locked_by", flat=True)
    )
    assert set(workers) == {"machine-a", "machine-b"}, workers
    assert sorted(call.json["n"] for call in model_server.calls) == list(range(TASKS))
    assert 2 <= model_server.max_in_flight <= MAX_CONCURRENCY


def test_the_user_throttle_holds_across_both_web_servers(machines):
    web_a, web_b = machines
    # Hashed as the servers hash (the test process's settings use a faster hasher).
    password = PBKDF2PasswordHasher().encode("pw-roaming-123", "saltsaltsalt", iterations=1000)
    get_user_model().objects.create(username="roaming", password=password)
    token = requests.post(f"{web_a.url}/auth/token", json={"username": "roaming", "password": "pw-roaming-123"})
    assert token.status_code == 200, token.text
    headers = {"Authorization": f"Bearer {token.json()['access']}"}
    if time.time() % 60 > 55:  # fixed one-minute windows: start in one that does not end midway
        time.sleep(60.5 - time.time() % 60)
    answers = [requests.get(f"{web.url}/ai/profile", headers=headers).status_code for web in [web_a, web_b] * THROTTLE]
    assert answers[:THROTTLE] == [200] * THROTTLE  # three on each machine...
    assert answers[THROTTLE:] == [429] * THROTTLE  # ...and then none on either
