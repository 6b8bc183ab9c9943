"""A bulk rerun of 20,000 failed jobs through the real admin (gunicorn, a logged-in
operator's session) and a real Celery worker (contract section 12): the page answers
within seconds, the operation finishes in the background, each failed job has exactly
one rerun, and the same operation started again reruns nothing more."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.utils import timezone

from ai_jobs.models import AiRuntimeJob, BulkOperation
from tests.support.celery_workers import Workers, needs_postgres_and_redis  # noqa: F401  (fixture)
from tests.support.factories import UserFactory, consent
from tests.support.ops import admin_session, gunicorn
from tests.support.runtime_fixtures import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FAILED = 20_000
ANSWER_SECONDS = 5.0


def _failed_jobs(count: int) -> None:
    users = [UserFactory() for _ in range(4)]
    for user in users:
        consent(user)
    now = timezone.now()
    AiRuntimeJob.objects.bulk_create(
        [
            AiRuntimeJob(
                user=users[n % len(users)],
                job_type="learning_state_analysis",
                target_type="user",
                target_id=f"usr_{n}",
                status="failed",
                error_code="MODEL_TIMEOUT",
                error_message="the provider did not answer",
                attempt_no=4,
                retry_count=3,
                finished_at=now,
            )
            for n in range(count)
        ],
        batch_size=2_000,
    )


def _start(session, url: str, query: str) -> tuple[float, str]:
    """The confirm page, then its POST; the POST's time and the operation's id."""
    page = session.get(f"{url}/admin/ai_jobs/airuntimejob/bulk/rerun/?{query}", timeout=30)
    assert page.status_code == 200, page.text[:500]
    started = time.monotonic()
    answer = session.post(
        f"{url}/admin/ai_jobs/airuntimejob/bulk/rerun/?{query}",
        data={"csrfmiddlewaretoken": session.cookies["csrftoken"]},
        headers={"Referer": page.url},
        timeout=30,
        allow_redirects=False,
    )
    took = time.monotonic() - started
    assert answer.status_code == 302, answer.text[:500]
    operation_id = re.search(r"/bulkoperation/([^/]+)/", answer.headers["Location"]).group(1)
    return took, operation_id


def _finished(operation_id: str) -> BulkOperation:
    return wait_for(
        lambda: BulkOperation.objects.filter(id=operation_id, finished_at__isnull=False).first(),
        timeout=240,
        every=0.5,
        what=f"bulk operation {operation_id} to finish",
    )


@pytest.mark.usefixtures("needs_postgres_and_redis")
def test_twenty_thousand_failed_jobs_rerun_by_one_operation_from_the_admin(tmp_path: Path, settings):
    _failed_jobs(FAILED)
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # one the server checks
    get_user_model().objects.create_superuser("operator", "op@example.com", "operator-password")
    broker = {"CELERY_BROKER_URL": settings.REDIS_URL, "REDIS_URL": settings.REDIS_URL}
    workers = Workers(tmp_path)
    try:
        workers.start("bulk", **broker)
        workers.wait_ready()
        env = {**broker, "CELERY_TASK_ALWAYS_EAGER": "false"}
        with gunicorn(tmp_path / "gunicorn.log", workers=2, env=env) as server:
            session = admin_session(server.url, "operator", "operator-password")
            listed = session.get(f"{server.url}/admin/ai_jobs/airuntimejob/?status__exact=failed", timeout=30)
            assert "Rerun all failed matching" in listed.text

            took, first_id = _start(session, server.url, "status__exact=failed&error_code=MODEL_TIMEOUT")
            assert took < ANSWER_SECONDS, f"the page answered in {took:.2f}s"
            first = _finished(first_id)
            assert (first.matched, first.done, first.refused, first.skipped) == (FAILED, FAILED, 0, 0)
            assert first.filter == {"status": "failed", "error_code": "MODEL_TIMEOUT"}
            assert first.created_by.username == "operator"
            reruns = AiRuntimeJob.objects.filter(retried_from_job__isnull=False)
            assert reruns.count() == FAILED
            assert reruns.values("retried_from_job").distinct().count() == FAILED
            assert not AiRuntimeJob.objects.filter(status="failed", rerun_as__isnull=True).exists()
            assert LogEntry.objects.filter(object_id=first_id, change_message__contains=first_id).exists()
            page = session.get(f"{server.url}/admin/ai_jobs/bulkoperation/", timeout=30).text
            assert "Bulk operations" in page and first_id in page

            took, again_id = _start(session, server.url, "status__exact=failed&error_code=MODEL_TIMEOUT")
            assert took < ANSWER_SECONDS
            again = _finished(again_id)
            assert (again.matched, again.done, again.refused, again.skipped) == (FAILED, 0, 0, FAILED)
            assert AiRuntimeJob.objects.filter(retried_from_job__isnull=False).count() == FAILED
    finally:
        workers.stop()
