"""The job state machine (``ai_jobs.transitions``), transition by transition: each
move it makes and each refusal, through the runtime API and the reaper, on PostgreSQL
and on the embedded default (SQLite)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from ai_jobs import services
from ai_jobs.models import AiRuntimeJob, AiRuntimeResult
from tests.support.api import ALL_TYPES, RuntimeClient, error_code
from tests.support.factories import VALID_OUTPUTS, JobFactory
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def _locked(runtime: RuntimeClient, **job_fields) -> AiRuntimeJob:
    job = JobFactory(**job_fields)
    assert runtime.lock(job.id).status_code == 200
    return AiRuntimeJob.objects.get(id=job.id)


def _lapse(job_id: str, seconds: int = 1) -> None:
    AiRuntimeJob.objects.filter(id=job_id).update(lock_until=timezone.now() - dt.timedelta(seconds=seconds))


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


# --- pending → locked: lock and claim ------------------------------------------------------------


def test_lock_moves_pending_to_locked_with_a_lease_and_a_new_attempt(runtime, settings):
    job = JobFactory()
    before = timezone.now()
    response = runtime.lock(job.id)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "locked" and body["attemptNo"] == 1 and body["jobId"] == job.id
    expected = (before + dt.timedelta(seconds=settings.AI_JOB_LOCK_SECONDS)).timestamp() * 1000
    assert abs(body["lockUntil"] - expected) < 2000
    job.refresh_from_db()
    assert job.locked_by == "runtime-1" and job.status == "locked"


def test_lock_of_a_job_another_runtime_holds_is_job_already_locked(runtime, other_runtime):
    job = _locked(runtime)
    response = other_runtime.lock(job.id)
    assert response.status_code == 409 and error_code(response) == "JOB_ALREADY_LOCKED"
    assert response.json()["error"]["retryable"] is True


def test_lock_of_a_final_job_is_job_not_active_and_of_a_missing_job_not_found(runtime):
    for status in ("succeeded", "failed", "cancelled"):
        response = runtime.lock(JobFactory(status=status).id)
        assert response.status_code == 409 and error_code(response) == "JOB_NOT_ACTIVE"
    response = runtime.lock("job_missing")
    assert response.status_code == 404 and error_code(response) == "JOB_NOT_FOUND"


def test_claim_locks_the_jobs_it_returns_for_the_caller(runtime):
    jobs = JobFactory.create_batch(3)
    response = runtime.claim(limit=2)
    claimed = response.json()["jobs"]
    assert [j["jobId"] for j in claimed] == [jobs[0].id, jobs[1].id]
    assert all(j["status"] == "locked" and j["attemptNo"] == 1 and j["lockUntil"] for j in claimed)
    assert AiRuntimeJob.objects.get(id=jobs[0].id).locked_by == "runtime-1"
    assert AiRuntimeJob.objects.get(id=jobs[2].id).status == "pending"


# --- locked → running: heartbeat --------------------------------------------------------------------


def test_first_heartbeat_moves_locked_to_running_and_extends_the_lease(runtime):
    job = _locked(runtime)
    response = runtime.heartbeat(job.id)
    assert response.status_code == 200
    body = response.json()
    assert body == {"jobId": job.id, "lockUntil": body["lockUntil"], "cancelRequested": False}
    job.refresh_from_db()
    assert job.status == "running" and job.started_at is not None
    assert body["lockUntil"] == int(job.lock_until.timestamp() * 1000)


def test_heartbeat_reports_a_requested_cancellation(runtime):
    job = _locked(runtime)
    AiRuntimeJob.objects.filter(id=job.id).update(cancel_requested=True)
    assert runtime.heartbeat(job.id).json()["cancelRequested"] is True


def test_heartbeat_from_another_instance_or_on_a_lapsed_lease_is_job_not_active(runtime, other_runtime):
    job = _locked(runtime)
    assert error_code(other_runtime.heartbeat(job.id)) == "JOB_NOT_ACTIVE"
    AiRuntimeJob.objects.filter(id=job.id).update(lock_until=timezone.now() - dt.timedelta(seconds=1))
    response = runtime.heartbeat(job.id)
    assert response.status_code == 409 and "lapsed" in response.json()["error"]["message"]
    assert error_code(runtime.heartbeat("job_missing")) == "JOB_NOT_FOUND"


# --- locked/running → succeeded: result -------------------------------------------------------------


def test_a_result_from_a_stale_attempt_or_another_instance_is_job_not_active(runtime, other_runtime):
    job = _locked(runtime)
    output = VALID_OUTPUTS["learning_state_analysis"]
    assert error_code(runtime.result(job.id, 2, output)) == "JOB_NOT_ACTIVE"
    assert error_code(other_runtime.result(job.id, 1, output)) == "JOB_NOT_ACTIVE"
    assert error_code(runtime.result("job_missing", 1, output)) == "JOB_NOT_FOUND"


# --- locked/running → pending, failed or cancelled: fail ------------------------------------------


def test_a_retryable_failure_goes_back_to_pending_after_a_backoff(runtime):
    job = _locked(runtime)
    before = timezone.now()
    response = runtime.fail(job.id, 1, "MODEL_RATE_LIMIT")
    assert response.status_code == 200
    assert response.json() == {"jobId": job.id, "status": "pending", "retryCount": 1}
    job.refresh_from_db()
    assert job.status == "pending" and job.locked_by is None and job.error_code == "MODEL_RATE_LIMIT"
    assert job.available_at > before  # not offered again at once
    assert runtime.post("jobs/poll", {"capabilities": ALL_TYPES}).json()["jobs"] == []


def test_retries_are_counted_until_max_retry_count_then_failed(runtime):
    job = JobFactory(max_retry_count=2)
    statuses = []
    for attempt in (1, 2, 3):
        AiRuntimeJob.objects.filter(id=job.id).update(available_at=timezone.now())
        assert runtime.lock(job.id).json()["attemptNo"] == attempt
        statuses.append(runtime.fail(job.id, attempt, "MODEL_TIMEOUT").json())
    assert [(s["status"], s["retryCount"]) for s in statuses] == [("pending", 1), ("pending", 2), ("failed", 2)]
    job.refresh_from_db()
    assert job.finished_at is not None


@pytest.mark.parametrize(
    "code", ["INVALID_SNAPSHOT", "CREDENTIAL_RESOLVE_FAILED", "UNSUPPORTED_JOB_TYPE", "MODEL_RESPONSE_INVALID",
             "MODEL_JSON_PARSE_FAILED", "JOB_TIMEOUT"],
)  # fmt: skip
def test_a_non_retryable_failure_fails_the_job_for_good(runtime, code):
    job = _locked(runtime)
    assert runtime.fail(job.id, 1, code).json()["status"] == "failed"


def test_job_cancelled_moves_the_job_to_cancelled(runtime):
    job = _locked(runtime)
    assert runtime.fail(job.id, 1, "JOB_CANCELLED").json() == {"jobId": job.id, "status": "cancelled", "retryCount": 0}


def test_a_retryable_failure_of_a_job_whose_cancellation_was_requested_ends_cancelled(runtime):
    learner = Learner()
    job_id = learner.job().json()["jobId"]
    runtime.lock(job_id)
    learner.client.post(f"/ai/jobs/{job_id}/cancel")
    assert runtime.fail(job_id, 1, "MODEL_TIMEOUT").json()["status"] == "cancelled"


def test_fail_with_an_unknown_code_or_by_a_stale_holder_is_refused(runtime, other_runtime):
    job = _locked(runtime)
    assert runtime.fail(job.id, 1, "SOMETHING_ELSE").status_code == 400
    assert error_code(other_runtime.fail(job.id, 1, "MODEL_TIMEOUT")) == "JOB_NOT_ACTIVE"
    assert error_code(runtime.fail(job.id, 7, "MODEL_TIMEOUT")) == "JOB_NOT_ACTIVE"


# --- locked/running → expired → pending, failed or cancelled: the reaper -------------------------


def test_a_lapsed_lease_goes_back_to_pending_with_one_more_retry(runtime):
    job = JobFactory()
    runtime.lock(job.id)
    _lapse(job.id)
    assert services.jobs_reap() == {"expired": 1, "pending": 1}
    job.refresh_from_db()
    assert (job.status, job.retry_count, job.locked_by, job.lock_until) == ("pending", 1, None, None)
    assert job.error_code == "JOB_TIMEOUT"


def test_a_job_past_its_timeout_expires_even_with_a_fresh_lease(runtime):
    job = JobFactory(timeout_seconds=30)
    runtime.lock(job.id)
    runtime.heartbeat(job.id)
    AiRuntimeJob.objects.filter(id=job.id).update(deadline_ms=int(timezone.now().timestamp() * 1000) - 1)
    services.jobs_reap()
    job.refresh_from_db()
    assert job.status == "pending" and job.retry_count == 1


def test_a_live_lease_is_left_alone(runtime):
    job = JobFactory()
    runtime.lock(job.id)
    assert services.jobs_reap() == {}
    job.refresh_from_db()
    assert job.status == "locked"


def test_past_max_retry_count_the_job_fails_with_job_timeout(runtime):
    job = JobFactory(max_retry_count=1, retry_count=1)
    runtime.lock(job.id)
    _lapse(job.id)
    assert services.jobs_reap() == {"expired": 1, "failed": 1}
    job.refresh_from_db()
    assert (job.status, job.error_code, job.retry_count) == ("failed", "JOB_TIMEOUT", 1)
    assert job.finished_at is not None


def test_a_lapsed_job_whose_cancellation_was_requested_ends_cancelled(runtime):
    job = JobFactory()
    runtime.lock(job.id)
    services.jobs_cancel(job_ids=[job.id])
    _lapse(job.id)
    services.jobs_reap()
    job.refresh_from_db()
    assert (job.status, job.error_code) == ("cancelled", "JOB_CANCELLED")


def test_the_stale_holder_can_no_longer_heartbeat_submit_or_fail(runtime, other_runtime):
    job = JobFactory()
    runtime.lock(job.id)
    _lapse(job.id)
    services.jobs_reap()
    assert other_runtime.lock(job.id).json()["attemptNo"] == 2
    for response in (
        runtime.heartbeat(job.id),
        runtime.result(job.id, 1, VALID_OUTPUTS["learning_state_analysis"]),
        runtime.fail(job.id, 1, "MODEL_TIMEOUT"),
        runtime.post(f"jobs/{job.id}/credential"),
    ):
        assert response.status_code == 409 and error_code(response) == "JOB_NOT_ACTIVE"
    # ...while the new holder carries on.
    assert other_runtime.result(job.id, 2, VALID_OUTPUTS["learning_state_analysis"]).status_code == 200


def test_the_stale_holder_is_refused_even_before_the_reaper_runs(runtime):
    job = JobFactory()
    runtime.lock(job.id)
    _lapse(job.id)
    assert error_code(runtime.heartbeat(job.id)) == "JOB_NOT_ACTIVE"
    assert error_code(runtime.result(job.id, 1, VALID_OUTPUTS["learning_state_analysis"])) == "JOB_NOT_ACTIVE"


# --- pending → cancelled, and a cancel requested of a leased job: cancel -----------------------


def test_cancel_ends_pending_jobs_flags_leased_ones_and_leaves_finished_ones(runtime):
    pending, leased, finished = JobFactory(), _locked(runtime), JobFactory(status="succeeded")
    assert services.jobs_cancel(job_ids=[pending.id, leased.id, finished.id]) == (1, 1)
    states = dict(AiRuntimeJob.objects.values_list("id", "status"))
    assert (states[pending.id], states[leased.id], states[finished.id]) == ("cancelled", "locked", "succeeded")
    assert AiRuntimeJob.objects.get(id=pending.id).error_code == "JOB_CANCELLED"
    assert runtime.heartbeat(leased.id).json()["cancelRequested"] is True
    assert error_code(runtime.lock(pending.id)) == "JOB_NOT_ACTIVE"  # never handed out again


# --- an attempt's life: live while its lease holds and its timeoutSeconds since its start have
# not passed; started (locked → running) by the first call that shows its runtime at work ------


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
