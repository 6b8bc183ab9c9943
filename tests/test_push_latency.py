"""A push reaches the learner at once (issue 28): with gunicorn serving the API and a
real Celery worker process sending pushes, each device's push reaches its stand-in
within 3 s (p95) of the runtime's answered result, on this machine under the suite's
load. The result's request does not wait for it: the push is after commit, off its path."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest
import requests

from tests.support.celery_workers import needs_postgres_and_redis, workers_fixture  # noqa: F401  (fixtures)
from tests.support.factories import VALID_OUTPUTS
from tests.support.ops import gunicorn
from tests.support.push import ANDROID_TOKEN, IOS_TOKEN, standins_fixture  # noqa: F401  (fixtures)
from tests.support.push_standins import PushStandins
from tests.support.runtime_fixtures import wait_for

pytestmark = [
    # Its claim is a latency on this machine (p95 within 3 s): measured alone, not beside another xdist worker's test.
    pytest.mark.serial,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("needs_postgres_and_redis"),
]

JOBS = 12
RUNTIME = {"Authorization": "Bearer ops-runtime-token-for-the-test-servers", "x-runtime-instance-id": "latency-runtime"}


def test_a_push_reaches_each_device_within_3_seconds_of_the_results_answer(
    standins: PushStandins, workers, settings, tmp_path: Path
):
    standins.reset()
    env = {**standins.settings(), "CELERY_TASK_ALWAYS_EAGER": "false", "CELERY_BROKER_URL": settings.REDIS_URL}
    env_web = {**env, "ALLOW_REGISTRATION": "true", "REGISTRATION_THROTTLE_RATE": "1000/hour"}
    workers.start("push", **env)
    with gunicorn(tmp_path / "gunicorn.log", workers=2, env=env_web) as server:
        workers.wait_ready()
        joined = requests.post(
            f"{server.url}/auth/register", json={"username": "latency-learner", "password": "a-long-test-password-1"},
            timeout=10,
        )  # fmt: skip
        assert joined.status_code == 201, joined.text
        learner = {"Authorization": f"Bearer {joined.json()['access']}"}
        consented = requests.patch(
            f"{server.url}/ai/settings", json={"aiAnalysisEnabled": True}, headers=learner, timeout=10
        )
        assert consented.status_code == 200, consented.text
        for platform, token, locale in (("ios", IOS_TOKEN, "zh-CN"), ("android", ANDROID_TOKEN, "en")):
            registered = requests.post(
                f"{server.url}/ai/devices", json={"platform": platform, "token": token, "locale": locale},
                headers=learner, timeout=10,
            )  # fmt: skip
            assert registered.status_code == 201, registered.text

        latencies: list[float] = []
        answers: list[float] = []
        for n in range(JOBS):
            created = requests.post(
                f"{server.url}/ai/jobs",
                json={"jobType": "learning_state_analysis", "targetType": "user", "targetId": "me",
                      "idempotencyKey": f"latency-{n}"},
                headers=learner, timeout=10,
            )  # fmt: skip
            job_id = created.json()["jobId"]
            locked = requests.post(
                f"{server.url}/internal/runtime/jobs/{job_id}/lock", json={}, headers=RUNTIME, timeout=10
            )
            attempt = locked.json()["attemptNo"]
            started = time.monotonic()
            result = requests.post(
                f"{server.url}/internal/runtime/jobs/{job_id}/result",
                json={"attemptNo": attempt, "output": VALID_OUTPUTS["learning_state_analysis"],
                      "usage": {"promptTokens": 1, "completionTokens": 1, "totalTokens": 2}, "costCents": 0},
                headers=RUNTIME, timeout=10,
            )  # fmt: skip
            answered = time.monotonic()
            assert result.status_code == 200, result.text
            answers.append(answered - started)

            def pushed(job_id: str = job_id) -> list[float] | None:
                seen = [r.at for r in standins.apns.received + standins.google.received if _job_of(r.body) == job_id]
                return seen if len(seen) == 2 else None

            for at in wait_for(pushed, timeout=30, every=0.01, what=f"both pushes of {job_id}"):
                latencies.append(max(0.0, at - answered))

    assert standins.apns.problems == [] and standins.google.problems == []
    assert len(standins.apns.received) == len(standins.google.received) == JOBS  # one push per device and job
    p95 = statistics.quantiles(latencies, n=20)[-1]
    print(f"push after the result's answer: p50 {statistics.median(latencies):.3f} s, p95 {p95:.3f} s; "
          f"result answered in p50 {statistics.median(answers):.3f} s")  # fmt: skip
    assert p95 <= 3.0, latencies


def _job_of(body: dict) -> str:
    return str(body.get("jobId") or body.get("message", {}).get("data", {}).get("jobId", ""))
