"""Operators in Django admin: filter the queue, rerun failed jobs, cancel."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from ai_jobs.models import AiRuntimeJob
from tests.conftest import RuntimeClient
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("operator", "op@example.com", "pw"))
    return client


def _action(client: Client, action: str, ids: list[str]):
    return client.post(
        "/admin/ai_jobs/airuntimejob/", {"action": action, "_selected_action": ids, "index": 0}, follow=True
    )


def test_rerun_makes_a_new_job_from_each_failed_one_and_skips_the_rest(operator):
    failed = JobFactory(status="failed", error_code="MODEL_RESPONSE_INVALID", retry_count=3, attempt_no=4)
    done = JobFactory(status="succeeded")
    response = _action(operator, "rerun_failed", [failed.id, done.id])
    assert "1 job(s) rerun" in response.content.decode()
    rerun = AiRuntimeJob.objects.get(retried_from_job=failed)
    assert (rerun.status, rerun.attempt_no, rerun.retry_count, rerun.error_code) == ("pending", 0, 0, None)
    assert (rerun.job_type, rerun.target_id, rerun.user_id) == (failed.job_type, failed.target_id, failed.user_id)
    failed.refresh_from_db()
    assert failed.status == "failed"  # the old job is kept as it was
    assert not AiRuntimeJob.objects.filter(retried_from_job=done).exists()


def test_cancel_cancels_pending_and_flags_running_jobs(operator):
    pending = JobFactory()
    running = JobFactory()
    runtime = RuntimeClient("runtime-1")
    runtime.lock(running.id)
    runtime.heartbeat(running.id)
    response = _action(operator, "cancel_jobs", [pending.id, running.id])
    assert "1 pending job(s) cancelled; cancellation requested for 1" in response.content.decode()
    assert AiRuntimeJob.objects.get(id=pending.id).status == "cancelled"
    assert runtime.heartbeat(running.id).json()["cancelRequested"] is True
    assert runtime.fail(running.id, 1, "JOB_CANCELLED").json()["status"] == "cancelled"


def test_the_queue_pages_render_with_their_filters(operator):
    job = JobFactory(status="failed")
    for url in (
        "/admin/ai_jobs/airuntimejob/?status__exact=failed&job_type__exact=learning_state_analysis",
        f"/admin/ai_jobs/airuntimejob/?q={job.user.username}",
        f"/admin/ai_jobs/airuntimejob/{job.id}/change/",
        "/admin/ai_jobs/airuntimeresult/",
        "/admin/ai_jobs/aiinvocationlog/",
    ):
        response = operator.get(url)
        assert response.status_code == 200, url
    assert job.id in operator.get("/admin/ai_jobs/airuntimejob/?status__exact=failed").content.decode()


def test_the_queue_dashboard_counts_jobs_by_type_and_status(operator):
    JobFactory.create_batch(3)
    JobFactory(status="failed", error_code="MODEL_TIMEOUT", finished_at=timezone.now())
    page = operator.get("/admin/ai_jobs/airuntimejob/dashboard/")
    assert page.status_code == 200
    text = page.content.decode()
    assert re.search(r'data-tile="pending"><span class="label">Pending</span><span class="big">3<', text)
    assert "MODEL_TIMEOUT" in text and 'data-chart="throughput-hour"' in text
    partial = operator.get("/admin/ai_jobs/airuntimejob/dashboard/?partial=1").content.decode()
    assert partial.lstrip().startswith("<header") and "MODEL_TIMEOUT" in partial
    assert "Queue dashboard" in operator.get("/admin/ai_jobs/airuntimejob/").content.decode()


def test_the_dashboard_is_for_staff_only():
    client = Client()
    assert client.get("/admin/ai_jobs/airuntimejob/dashboard/").status_code == 302
    client.force_login(get_user_model().objects.create_user("learner", "l@example.com", "pw"))
    assert client.get("/admin/ai_jobs/airuntimejob/dashboard/?partial=1").status_code == 302
