"""An attempt's life over the internal API: it is live only while its lease holds and
its ``timeoutSeconds`` since it started have not passed, and it starts (``running``,
``startedAt``) at the first call that shows its runtime at work."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from ai_jobs import services
from ai_jobs.models import AiRuntimeJob, AiRuntimeResult
from tests.support.api import RuntimeClient, error_code
from tests.support.factories import VALID_OUTPUTS, JobFactory

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

OUTPUT = VALID_OUTPUTS["learning_state_analysis"]


def _back(job_id: str, seconds: float, *, lease_too: bool = True) -> None:
    """Move the attempt's clock back by ``seconds``, as if that much time had passed:
    every moment it recorded (and its lease, unless ``lease_too`` is off: a runtime
    that kept heartbeating) lies that much earlier."""
    job = AiRuntimeJob.objects.get(id=job_id)
    shift = dt.timedelta(seconds=seconds)
    moved = {
        "locked_at": job.locked_at - shift if job.locked_at else None,
        "started_at": job.started_at - shift if job.started_at else None,
        "deadline_ms": job.deadline_ms - int(seconds * 1000) if job.deadline_ms is not None else None,
    }
    if lease_too:
        moved["lock_until"] = job.lock_until - shift
    AiRuntimeJob.objects.filter(id=job_id).update(**moved)


def _every_call_of_the_attempt(runtime: RuntimeClient, job_id: str) -> dict[str, object]:
    return {
        "heartbeat": runtime.heartbeat(job_id),
        "snapshot": runtime.get(f"jobs/{job_id}/snapshot"),
        "credential": runtime.post(f"jobs/{job_id}/credential"),
        "result": runtime.result(job_id, 1, OUTPUT),
        "fail": runtime.fail(job_id, 1, "MODEL_TIMEOUT"),
    }


@pytest.mark.parametrize(
    "seconds, lease_too, reason",
    [(61, True, "the lease lapsed"), (121, False, "ran past its timeoutSeconds")],
    ids=["lease-lapsed", "timeout-passed"],
)
def test_a_lapsed_attempt_is_over_at_once_and_the_reaper_still_returns_it(runtime, seconds, lease_too, reason):
    job = JobFactory(timeout_seconds=120)  # the lease: 60 s
    runtime.lock(job.id)
    assert runtime.heartbeat(job.id).status_code == 200
    _back(job.id, seconds, lease_too=lease_too)  # the reaper has not run since
    for call, response in _every_call_of_the_attempt(runtime, job.id).items():
        assert (call, response.status_code, error_code(response)) == (call, 409, "JOB_NOT_ACTIVE")
        assert reason in response.json()["error"]["message"], call
    stored = AiRuntimeJob.objects.get(id=job.id)
    assert (stored.status, stored.finished_at) == ("running", None)
    assert not AiRuntimeResult.objects.filter(job_id=job.id).exists()
    assert services.jobs_reap() == {"expired": 1, "pending": 1}
    stored.refresh_from_db()
    assert (stored.status, stored.retry_count, stored.error_code) == ("pending", 1, "JOB_TIMEOUT")


def test_timeout_seconds_count_from_the_start_not_from_the_lock(runtime):
    job = JobFactory(timeout_seconds=30)
    runtime.lock(job.id)
    _back(job.id, 45)  # locked 45 s ago, its lease still live: not started, so no deadline yet
    assert runtime.heartbeat(job.id).status_code == 200  # the start: 30 s from now
    assert services.jobs_reap() == {}
    _back(job.id, 29, lease_too=False)
    response = runtime.result(job.id, 1, OUTPUT)
    assert response.status_code == 200, response.json()
    assert AiRuntimeJob.objects.get(id=job.id).status == "succeeded"


@pytest.mark.parametrize("call", ["snapshot", "credential"])
def test_the_attempts_first_snapshot_or_credential_starts_it(runtime, call):
    ask = {
        "snapshot": lambda job_id: runtime.get(f"jobs/{job_id}/snapshot"),
        "credential": lambda job_id: runtime.post(f"jobs/{job_id}/credential"),
    }[call]
    job = JobFactory(timeout_seconds=30)
    runtime.lock(job.id)
    before = timezone.now()
    assert ask(job.id).status_code == 200
    started = AiRuntimeJob.objects.get(id=job.id)
    assert started.status == "running" and started.started_at >= before
    assert ask(job.id).status_code == 200 and runtime.heartbeat(job.id).status_code == 200
    assert AiRuntimeJob.objects.get(id=job.id).started_at == started.started_at  # started once
    _back(job.id, 31, lease_too=False)  # its timeoutSeconds count from that start
    assert error_code(ask(job.id)) == "JOB_NOT_ACTIVE"


def test_a_later_attempt_starts_again_at_its_own_first_call(runtime):
    job = JobFactory()
    runtime.lock(job.id)
    runtime.heartbeat(job.id)
    _back(job.id, 10)
    first = AiRuntimeJob.objects.get(id=job.id).started_at
    assert runtime.fail(job.id, 1, "NETWORK_ERROR").json()["status"] == "pending"
    AiRuntimeJob.objects.filter(id=job.id).update(available_at=timezone.now())
    assert runtime.lock(job.id).json()["attemptNo"] == 2
    assert runtime.post(f"jobs/{job.id}/credential").status_code == 200
    second = AiRuntimeJob.objects.get(id=job.id)
    assert second.status == "running" and second.started_at > first


def test_a_result_straight_from_locked_starts_the_attempt_where_it_ends(runtime):
    job = JobFactory()
    runtime.lock(job.id)
    before = timezone.now()
    response = runtime.result(job.id, 1, OUTPUT)
    assert response.status_code == 200, response.json()
    done = AiRuntimeJob.objects.get(id=job.id)
    assert done.status == "succeeded" and done.started_at is not None
    assert before <= done.started_at <= done.finished_at
