"""The embedded default's throttles hold across processes: with no Redis the window is
a row of the database every gunicorn worker shares, so two workers on SQLite admit the
documented 60 requests a minute between them and answer the 61st ``429``; and a
guessing address is counted and blocked there too."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from quotas import throttles
from quotas.models import ThrottleWindow
from tests.support.api import ALL_TYPES, RuntimeClient
from tests.support.concurrency import run_together
from tests.support.ops import Gunicorn, gunicorn
from tests.support.runtime_fixtures import ROOT
from tests.support.user_api import Learner


@pytest.mark.embedded
@pytest.mark.django_db
def test_without_redis_a_window_is_one_row_counted_by_one_statement_and_ended_ones_are_swept(settings, monkeypatch):
    settings.REDIS_URL = ""
    settings.USER_THROTTLE_RATE = "3/min"
    now = [1_800_000_010.0]
    monkeypatch.setattr("quotas.throttles.clock", lambda: now[0])
    learner = Learner()
    assert [learner.get("/ai/profile").status_code for _ in range(4)] == [200, 200, 200, 429]
    (window,) = ThrottleWindow.objects.all()
    assert window.count == 4 and window.expires_at == 1_800_000_010.0 + 61
    now[0] += 62  # the next minute: a new window, and the ended one (kept a second past its end) swept
    assert learner.get("/ai/profile").status_code == 200
    assert [w.count for w in ThrottleWindow.objects.all()] == [1]


@pytest.mark.django_db(transaction=True)  # threads: PostgreSQL (the gunicorn test below runs SQLite's file)
def test_without_redis_concurrent_requests_at_the_edge_never_pass_more_than_the_rate(settings, monkeypatch):
    settings.REDIS_URL = ""
    settings.RUNTIME_THROTTLE_RATE = "10/min"
    monkeypatch.setattr("quotas.throttles.clock", lambda: 1_800_000_030.0)
    assert throttles._redis() is None

    def poll(i: int) -> int:
        return RuntimeClient("edge-runtime").post("jobs/poll", {"capabilities": ALL_TYPES}).status_code

    assert Counter(run_together(25, poll)) == {200: 10, 429: 15}


@contextlib.contextmanager
def embedded_server(tmp_path: Path, **extra: str) -> Iterator[Gunicorn]:
    """Two gunicorn workers on the embedded default (SQLite, no Redis, no broker), set up
    as make run sets it up (dev_bootstrap runs only with DEBUG on; the server runs without)."""
    var = tmp_path / "var"
    env = {
        "DATABASE_URL": f"sqlite:///{var / 'db.sqlite3'}",
        "VAR_DIR": str(var),
        "REDIS_URL": "<unset>",
        "METRICS_REDIS_URL": "<unset>",
        "PROMETHEUS_MULTIPROC_DIR": str(var / "metrics"),
        "CELERY_BROKER_URL": "<unset>",
        "LOG_FORMAT": "json",
        "CREDENTIAL_DEV_KEY_WARNING": "false",
        **extra,
    }
    setup_env = {k: v for k, v in {**os.environ, **env, "DEBUG": "true"}.items() if v != "<unset>"}
    for command in (["migrate", "--noinput", "-v0"], ["dev_bootstrap"]):
        subprocess.run(
            [sys.executable, "manage.py", *command], cwd=ROOT, env=setup_env, check=True, capture_output=True
        )
    with gunicorn(tmp_path / "gunicorn.log", workers=2, env=env) as server:
        yield server


def answered_by(server: Gunicorn, path: str) -> set[int]:
    """The worker processes whose access log lines name ``path``."""
    return answered_by_since(server, path, 0)


def answered_by_since(server: Gunicorn, path: str, start: int) -> set[int]:
    """The same, from the log's line ``start`` on."""
    lines = [json.loads(line) for line in server.lines()[start:] if line.startswith("{")]
    return {line["process"] for line in lines if line["logger"] == "gunicorn.access" and path in line["message"]}


@pytest.mark.slow
def test_two_gunicorn_workers_on_the_embedded_default_answer_the_61st_request_of_a_minute_429(tmp_path):
    with embedded_server(tmp_path, USER_THROTTLE_RATE="60/min") as server:  # the default, written out
        token = requests.post(
            server.url + "/auth/token", json={"username": "demo", "password": "demo"}, timeout=10
        ).json()["access"]
        # 61 requests take a few seconds: start with at least 15 left in the minute, so they
        # fall in one window (checked below).
        while time.time() % 60 > 45:
            time.sleep(0.5)
        window = time.time() // 60

        def profile(i: int) -> int:
            headers = {"Authorization": f"Bearer {token}", "Connection": "close"}  # each on a new connection
            return requests.get(server.url + "/ai/profile", headers=headers, timeout=30).status_code

        with ThreadPoolExecutor(4) as pool:  # concurrently, so both workers answer
            statuses = list(pool.map(profile, range(60)))
        last = profile(60)
        assert time.time() // 60 == window, "the requests crossed a minute's end"
        workers = answered_by(server, "/ai/profile")
    assert Counter(statuses) == {200: 60}
    assert last == 429
    assert len(workers) == 2, "both workers answered some of the requests"


@pytest.mark.slow
def test_a_claim_sent_again_to_either_gunicorn_worker_of_the_embedded_default_is_answered_the_same(tmp_path):
    """The embedded default has no shared cache (each process its own memory): a claimId
    is remembered in the database both workers share, so a claim sent again reaches
    whichever worker and is answered the jobs the first took, locking nothing more."""
    with embedded_server(tmp_path, USER_THROTTLE_RATE="10000/min") as server:
        token = requests.post(
            server.url + "/auth/token", json={"username": "demo", "password": "demo"}, timeout=10
        ).json()["access"]
        for _ in range(3):
            made = requests.post(
                server.url + "/ai/jobs",
                json={"jobType": "learning_state_analysis", "targetType": "user", "targetId": "me"},
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
            )
            assert made.status_code == 201, made.text

        def claim(claim_id: str) -> list[str]:
            answer = requests.post(
                server.url + "/internal/runtime/jobs/claim",
                json={"capabilities": ["learning_state_analysis"], "limit": 1, "claimId": claim_id},
                headers={
                    "Authorization": "Bearer ops-runtime-token-for-the-test-servers",
                    "x-runtime-instance-id": "rt-embedded",
                    "Connection": "close",  # each on a new connection: both workers answer some
                },
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            return [job["jobId"] for job in answer.json()["jobs"]]

        # A round whose claims one worker took all of proves nothing (a busy machine's kernel
        # may hand it every connection): again with the next job and another claimId.
        for round_ in range(3):
            claim_id = f"claim-across-workers-{round_}"
            logged = len(server.lines())
            first = claim(claim_id)
            with ThreadPoolExecutor(6) as pool:
                again = list(pool.map(claim, [claim_id] * 20))
            if len(answered_by_since(server, "/jobs/claim", logged)) == 2:
                break
        else:
            pytest.fail("in three rounds of 21 claims, one worker took every connection each time")
    assert len(first) == 1 and again == [first] * 20


@pytest.mark.slow
def test_two_gunicorn_workers_on_the_embedded_default_count_wrong_credentials_together(tmp_path):
    """AUTH_FAILURE_THROTTLE_RATE across both workers: the 31st wrong token of a minute is
    429 whichever worker takes it, and so is the right token and the right tenant key from
    that address after it (each process's memory would have let twice as many in). Which
    worker takes a connection is the kernel's choice, and a busy machine may hand one worker
    all of them: a round whose guesses only one worker answered proves nothing, so the test
    tries again from a fresh address (the one trusted proxy's ``X-Forwarded-For``)."""
    with embedded_server(tmp_path, AUTH_FAILURE_THROTTLE_RATE="30/min", NUM_PROXIES="1") as server:

        def poll(address: str, token: str) -> int:
            return requests.post(
                server.url + "/internal/runtime/jobs/poll",
                json={"capabilities": ["learning_state_analysis"]},
                headers={
                    "Authorization": f"Bearer {token}",
                    "x-runtime-instance-id": "rt-guess",
                    "X-Forwarded-For": address,
                    "Connection": "close",  # each on a new connection
                },
                timeout=30,
            ).status_code

        for round_ in range(5):
            address = f"203.0.113.{round_ + 10}"
            while time.time() % 60 > 45:  # a round's requests in one window (checked below)
                time.sleep(0.5)
            window, logged = time.time() // 60, len(server.lines())
            with ThreadPoolExecutor(6) as pool:
                guesses = list(pool.map(poll, [address] * 30, ["wrong-token-" + "x" * 40] * 30))
            workers = answered_by_since(server, "/jobs/poll", logged)
            if len(workers) < 2:
                continue  # one worker took every connection: again, from another address
            past = [poll(address, "wrong-token-" + "y" * 40) for _ in range(4)]
            right = [poll(address, "ops-runtime-token-for-the-test-servers") for _ in range(4)]
            tenant = requests.get(
                server.url + "/model/listModels",
                headers={"X-Api-Key": "ak_demo_make_run_local_key", "X-Forwarded-For": address},
                timeout=30,
            )
            elsewhere = poll("198.51.100.20", "ops-runtime-token-for-the-test-servers")
            assert time.time() // 60 == window, "the round crossed a minute's end"
            break
        else:
            pytest.fail("in five rounds of 30 guesses, one worker took every connection each time")
    assert guesses == [401] * 30
    assert past == [429] * 4 and right == [429] * 4
    assert tenant.status_code == 429
    assert elsewhere == 200  # another address, the same token: served
