"""The reaper: lapsed leases and jobs past timeoutSeconds go back to the queue
(or fail with JOB_TIMEOUT), and the stale lock holder can no longer act."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.management import call_command
from django.utils import timezone

from ai_jobs import services
from ai_jobs.models import AiRuntimeJob
from ai_jobs.tasks import reap_jobs
from tests.support.api import error_code
from tests.support.factories import VALID_OUTPUTS, JobFactory

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def _lapse(job_id: str, seconds: int = 1) -> None:
    AiRuntimeJob.objects.filter(id=job_id).update(lock_until=timezone.now() - dt.timedelta(seconds=seconds))


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


def test_a_backlog_drains_in_small_batches():
    user = JobFactory().user
    lapsed = timezone.now() - dt.timedelta(minutes=5)
    AiRuntimeJob.objects.bulk_create(
        AiRuntimeJob(
            user=user, job_type="learning_state_analysis", target_type="user", target_id="1",
            status="running", locked_by="gone", lock_until=lapsed, attempt_no=1,
        )
        for _ in range(53)
    )  # fmt: skip
    assert services.jobs_reap(batch_size=5) == {"expired": 53, "pending": 53}
    assert not AiRuntimeJob.objects.filter(status__in=["locked", "running", "expired"]).exists()


def test_a_job_left_expired_by_an_interrupted_run_is_settled():
    job = JobFactory(status="expired", attempt_no=1)
    services.jobs_reap()
    job.refresh_from_db()
    assert job.status == "pending" and job.retry_count == 1


def test_the_celery_task_and_the_command_run_the_reaper(runtime, capsys):
    first, second = JobFactory(), JobFactory()
    for job in (first, second):
        runtime.lock(job.id)
    _lapse(first.id)
    assert reap_jobs.apply().get() == {"expired": 1, "pending": 1}
    _lapse(second.id)
    call_command("reap_jobs", "--batch-size", "10")
    assert "expired=1" in capsys.readouterr().out
    assert AiRuntimeJob.objects.get(id=second.id).status == "pending"
