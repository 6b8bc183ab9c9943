"""The job state machine (``ai_jobs.transitions``), transition by transition: each
move it makes and each refusal, through the runtime API and the reaper, on PostgreSQL
and on the embedded default (SQLite)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from ai_jobs import services
from ai_jobs.models import AiRuntimeJob
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
