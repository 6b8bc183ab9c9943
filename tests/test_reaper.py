"""The reaper as a run: batches, a run interrupted, its task and command. What it does
to each job (expired, then pending, failed or cancelled) is tests/test_transitions.py's."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.management import call_command
from django.utils import timezone

from ai_jobs import services
from ai_jobs.models import AiRuntimeJob
from ai_jobs.tasks import reap_jobs
from tests.support.factories import JobFactory

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def _lapse(job_id: str, seconds: int = 1) -> None:
    AiRuntimeJob.objects.filter(id=job_id).update(lock_until=timezone.now() - dt.timedelta(seconds=seconds))


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
