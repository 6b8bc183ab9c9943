"""Operators in Django admin: filter the queue, rerun failed jobs, cancel."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from ai_jobs import services
from ai_jobs.models import AiRuntimeJob
from config.errors import DomainError
from tests.support.api import RuntimeClient
from tests.support.factories import JobFactory
from tests.support.user_api import Learner

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


def test_the_operations_dashboard_counts_jobs_by_type_and_status(operator):
    JobFactory.create_batch(3)
    JobFactory(status="failed", error_code="MODEL_TIMEOUT", finished_at=timezone.now())
    page = operator.get("/admin/ai_jobs/airuntimejob/dashboard/")
    assert page.status_code == 200
    text = page.content.decode()
    assert re.search(r'data-tile="pending"><span class="label">Pending</span><span class="big">3<', text)
    assert "MODEL_TIMEOUT" in text and 'data-chart="throughput-hour"' in text
    partial = operator.get("/admin/ai_jobs/airuntimejob/dashboard/?partial=1").content.decode()
    assert partial.lstrip().startswith("<header") and "MODEL_TIMEOUT" in partial
    assert "Operations dashboard" in operator.get("/admin/ai_jobs/airuntimejob/").content.decode()  # its one name


def test_the_dashboard_is_for_staff_only():
    client = Client()
    assert client.get("/admin/ai_jobs/airuntimejob/dashboard/").status_code == 302
    client.force_login(get_user_model().objects.create_user("learner", "l@example.com", "pw"))
    assert client.get("/admin/ai_jobs/airuntimejob/dashboard/?partial=1").status_code == 302


def test_a_rerun_is_recorded_on_its_source_and_a_second_rerun_is_refused_with_a_message(operator):
    failed = JobFactory(status="failed", error_code="MODEL_TIMEOUT")
    first = _action(operator, "rerun_failed", [failed.id])
    assert "1 job(s) rerun" in first.content.decode()
    rerun = AiRuntimeJob.objects.get(retried_from_job=failed)
    failed.refresh_from_db()
    assert failed.rerun_as_id == rerun.id
    again = _action(operator, "rerun_failed", [failed.id]).content.decode()
    assert f"Not rerun: Job {failed.id} was already rerun as {rerun.id}." in again and "0 job(s) rerun" in again
    page = operator.post(f"/admin/ai_jobs/airuntimejob/{failed.id}/rerun/", follow=True).content.decode()
    assert f"was already rerun as {rerun.id}" in page
    assert AiRuntimeJob.objects.filter(retried_from_job=failed).count() == 1
    assert operator.get(f"/admin/ai_jobs/airuntimejob/{failed.id}/rerun/").status_code == 405


def test_a_rerun_moves_its_sources_updated_at(operator):
    failed = JobFactory(status="failed", error_code="MODEL_TIMEOUT")
    long_ago = timezone.now() - dt.timedelta(days=1)
    AiRuntimeJob.objects.filter(id=failed.id).update(updated_at=long_ago)
    before = timezone.now()
    assert "1 job(s) rerun" in _action(operator, "rerun_failed", [failed.id]).content.decode()
    failed.refresh_from_db()
    assert failed.rerun_as_id is not None and failed.updated_at >= before


def test_two_operators_rerunning_the_same_job_at_once_make_one_rerun():
    failed = JobFactory(status="failed", error_code="MODEL_TIMEOUT")
    stale = AiRuntimeJob.objects.get(id=failed.id)  # read before the first rerun
    services.job_rerun(job=failed)
    with pytest.raises(DomainError, match="already rerun"):
        services.job_rerun(job=stale)
    assert AiRuntimeJob.objects.filter(retried_from_job=failed).count() == 1


def test_a_rerun_leaves_the_stand_ins_fault_markers_behind_and_keeps_the_rest():
    params = {
        "questionCount": 5,
        "note": "[standin:429] exam prep [standin:delay=2.5]",
        "tags": ["[standin:bad_json]", "x"],
    }
    failed = JobFactory(status="failed", error_code="MODEL_RATE_LIMIT", params=params)
    rerun = services.job_rerun(job=failed)
    assert rerun.params == {"questionCount": 5, "note": "exam prep", "tags": ["", "x"]}
    assert AiRuntimeJob.objects.get(id=failed.id).params == params  # the failed job is kept as it was


def test_the_user_reads_rerun_as_on_the_failed_job_and_retried_from_on_the_rerun():
    learner = Learner()
    failed = JobFactory(user=learner.user, status="failed", error_code="MODEL_TIMEOUT")
    rerun = services.job_rerun(job=failed)
    assert learner.get(f"/ai/jobs/{failed.id}").json()["rerunAs"] == rerun.id
    body = learner.get(f"/ai/jobs/{rerun.id}").json()
    assert body["retriedFromJobId"] == failed.id and body["rerunAs"] is None


def test_every_job_page_is_read_only_and_a_failed_one_offers_its_rerun(operator):
    failed = JobFactory(status="failed", error_code="MODEL_TIMEOUT")
    done = JobFactory(status="succeeded")
    for job in (failed, done):
        page = operator.get(f"/admin/ai_jobs/airuntimejob/{job.id}/change/").content.decode()
        assert 'name="_save"' not in page and "deletelink" not in page
        assert ("rerun-button" in page) is (job is failed)
    assert operator.post(f"/admin/ai_jobs/airuntimejob/{done.id}/change/", {}).status_code == 403
    assert operator.get(f"/admin/ai_jobs/airuntimejob/{done.id}/delete/").status_code == 403


def test_a_mistyped_admin_address_is_an_admin_page_and_any_other_is_the_apis_json_error(operator):
    page = operator.get("/admin/ai_jobs/airuntimejobz/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
    assert "Page not found" in page.content.decode() and "/admin/ai_jobs/airuntimejobz/" in page.content.decode()
    api = operator.get("/ai/jobz")
    assert api.status_code == 404 and api.json()["error"]["code"] == "NOT_FOUND"
