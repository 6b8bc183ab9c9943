"""Job-complete notices (docs/api/jobs.md, Notices):
sent after the result's transaction commits and never when it rolls back, at most
once per job, listed and marked read by their owner only."""

from __future__ import annotations

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from accounts.selectors import public_id_of
from ai_jobs import notifications, tasks
from ai_jobs.models import AiRuntimeJob, AiRuntimeResult, Notification
from ai_jobs.services import result_persist
from tests.support.api import RuntimeClient, error_code, user_client
from tests.support.factories import VALID_OUTPUTS, JobFactory, UserFactory
from tests.support.learning_factories import KnowledgeBaseFactory
from tests.support.outputs import cards, kb_job, quiz

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


@pytest.fixture(autouse=True)
def _eager_celery(settings) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True


def submit(runtime: RuntimeClient, job: AiRuntimeJob, output: dict, capture) -> tuple[int, list]:
    """Lock the job and post its result, running what it leaves for after commit."""
    attempt = runtime.lock(job.id).json()["attemptNo"]
    with capture(execute=True) as callbacks:
        response = runtime.result(job.id, attempt, output)
    return response.status_code, callbacks


def test_the_notification_is_written_with_the_result(runtime, user, django_capture_on_commit_callbacks):
    # In the result's own transaction (that it is seen only once it commits is
    # tests/test_result_statements.py's, across connections on PostgreSQL).
    job = JobFactory(user=user)
    attempt = runtime.lock(job.id).json()["attemptNo"]
    with django_capture_on_commit_callbacks(execute=False):
        assert runtime.result(job.id, attempt, VALID_OUTPUTS["learning_state_analysis"]).status_code == 200
        notice = Notification.objects.get()  # no task, no callback: the row is there
    assert (notice.user_id, notice.job_id, notice.kind) == (user.pk, job.id, "job_succeeded")

    body = user_client(user).get("/ai/notifications").json()
    assert body["next"] is None
    [item] = body["results"]
    assert item["id"] == notice.id and item["jobId"] == job.id and item["jobType"] == "learning_state_analysis"
    assert item["kind"] == "job_succeeded" and item["title"] == "Learning analysis ready"
    assert item["message"] == "Mastery 72.5/100, level proficient." and item["isRead"] is False
    assert (item["targetType"], item["targetId"]) == ("user", public_id_of(user))


def test_a_rolled_back_result_sends_nothing(runtime, user, django_capture_on_commit_callbacks):
    job = JobFactory(user=user)
    status, callbacks = submit(runtime, job, {"summary": "no score"}, django_capture_on_commit_callbacks)
    assert status == 422 and callbacks == []
    # And a transaction that persisted records and then failed leaves no callback.
    result = AiRuntimeResult(job=job, attempt_no=1, output=VALID_OUTPUTS["learning_state_analysis"])
    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        result_persist(job=job, result=result)
        raise RuntimeError("a later step of the result failed")
    assert callbacks == [] and Notification.objects.count() == 0


def test_a_quiz_notification_counts_published_and_skipped_questions(runtime, django_capture_on_commit_callbacks):
    knowledge_base = KnowledgeBaseFactory()
    submit(runtime, kb_job(knowledge_base), quiz("Is 0 even?"), django_capture_on_commit_callbacks)
    job = kb_job(knowledge_base)
    submit(runtime, job, quiz("is 0 even", "Is 1 odd?", "Is 2 prime?"), django_capture_on_commit_callbacks)
    notice = Notification.objects.get(job_id=job.id)
    assert notice.message == "2 new questions published, 1 duplicate skipped."
    assert notice.data == {"published": 2, "duplicates": 1}
    flashcards = kb_job(knowledge_base, "flashcard_generation")
    submit(runtime, flashcards, cards("Numerator"), django_capture_on_commit_callbacks)
    assert Notification.objects.get(job_id=flashcards.id).message == "1 new flashcard published."


@pytest.mark.parametrize(
    ("job_type", "message"),
    [("weak_point_analysis", "1 weak point found."), ("next_action_planning", "1 recommendation.")],
)
def test_each_job_type_is_described(runtime, user, django_capture_on_commit_callbacks, job_type, message):
    job = JobFactory(user=user, job_type=job_type)
    submit(runtime, job, VALID_OUTPUTS[job_type], django_capture_on_commit_callbacks)
    assert Notification.objects.get(job_id=job.id).message == message


def test_the_task_run_twice_notifies_once(user):
    job = JobFactory(user=user, status="succeeded")
    first = tasks.notify_job_finished.delay(job.id)
    second = tasks.notify_job_finished.delay(job.id)
    assert first.successful() and second.successful()
    assert Notification.objects.filter(job_id=job.id).count() == 1


def test_a_final_failure_notifies_and_a_retry_does_not(runtime, user):
    retrying = JobFactory(user=user, max_retry_count=3)
    runtime.lock(retrying.id)
    assert runtime.fail(retrying.id, 1, "MODEL_TIMEOUT").json()["status"] == "pending"
    assert Notification.objects.count() == 0  # not final: a retry is coming
    cancelled = JobFactory(user=user)
    runtime.lock(cancelled.id)
    assert runtime.fail(cancelled.id, 1, "JOB_CANCELLED").json()["status"] == "cancelled"
    assert Notification.objects.count() == 0  # the user's own doing
    failed = JobFactory(user=user)
    runtime.lock(failed.id)
    assert runtime.fail(failed.id, 1, "MODEL_RESPONSE_INVALID").json()["status"] == "failed"
    notice = Notification.objects.get()
    assert (notice.job_id, notice.kind, notice.title) == (failed.id, "job_failed", "Learning analysis failed")
    assert notice.data == {"errorCode": "MODEL_RESPONSE_INVALID"}
    # The job row's own path (messages queued by earlier versions): the same notice, once.
    assert notifications.notification_create_for_job(job_id=failed.id) == notice
    assert notifications.notification_create_for_job(job_id=retrying.id) is None
    assert notifications.notification_create_for_job(job_id=cancelled.id) is None
    assert notifications.notification_create_for_job(job_id="job_missing") is None


def test_a_notice_function_that_fails_is_counted_and_the_result_stands(runtime, user, monkeypatch):
    from dataclasses import replace

    from ai_jobs.job_types import registry

    def broken(job, stored=None):
        raise KeyError("masteryScore")

    failures: list[int] = []

    class Counter:
        def inc(self) -> None:
            failures.append(1)

    monkeypatch.setattr(notifications, "NOTIFICATIONS_FAILED", Counter())
    declared = registry.get("learning_state_analysis")
    monkeypatch.setitem(registry._TYPES, declared.name, replace(declared, notice=broken))
    job = JobFactory(user=user)
    attempt = runtime.lock(job.id).json()["attemptNo"]
    assert runtime.result(job.id, attempt, VALID_OUTPUTS["learning_state_analysis"]).status_code == 200
    notice = Notification.objects.get(job_id=job.id)
    assert (notice.title, notice.message, notice.data) == ("Learning analysis ready", "", {})
    assert AiRuntimeJob.objects.get(id=job.id).status == "succeeded" and failures == [1]


def test_a_broker_that_is_down_does_not_lose_the_notice_nor_fail_the_result(
    runtime, user, django_capture_on_commit_callbacks, monkeypatch
):
    def broker_down(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(tasks.notify_job_finished, "delay", broker_down)
    job = JobFactory(user=user)
    status, _ = submit(runtime, job, VALID_OUTPUTS["learning_state_analysis"], django_capture_on_commit_callbacks)
    assert status == 200 and Notification.objects.filter(job_id=job.id).count() == 1


# --- the user API -------------------------------------------------------------------------------


def notice_of(user, **job_fields) -> Notification:
    job = JobFactory(user=user, status="succeeded", **job_fields)
    notice = notifications.notification_create_for_job(job_id=job.id)
    assert notice is not None
    return notice


def test_marking_read_answers_the_notice_and_is_idempotent(user):
    notice = notice_of(user)
    client = user_client(user)
    first = client.post(f"/ai/notifications/{notice.id}/read")
    assert first.status_code == 200
    body = first.json()
    assert body["id"] == notice.id and body["isRead"] is True and body["readAt"]
    again = client.post(f"/ai/notifications/{notice.id}/read")
    assert again.status_code == 200 and again.json()["readAt"] == body["readAt"]


def test_another_users_notice_is_not_found_and_stays_unread(user):
    theirs = notice_of(UserFactory())
    client = user_client(user)
    response = client.post(f"/ai/notifications/{theirs.id}/read")
    assert response.status_code == 404 and error_code(response) == "NOT_FOUND"
    missing = client.post("/ai/notifications/ntf_missing/read")
    assert missing.status_code == 404 and error_code(missing) == "NOT_FOUND"  # the same answer
    theirs.refresh_from_db()
    assert theirs.read_at is None
    assert client.get("/ai/notifications").json()["results"] == []


def test_notifications_filter_by_read_state_target_and_job(user):
    first = notice_of(user)
    second = notice_of(user, target_type="knowledge_base", target_id="kb_a")
    client = user_client(user)
    client.post(f"/ai/notifications/{first.id}/read")

    def ids(**query) -> list[str]:
        response = client.get("/ai/notifications", query)
        assert response.status_code == 200
        return [n["id"] for n in response.json()["results"]]

    assert ids() == [second.id, first.id]
    assert ids(isRead="false") == [second.id]
    assert ids(isRead="true") == [first.id]
    assert ids(targetType="knowledge_base", targetId="kb_a") == [second.id]
    assert ids(jobId=first.job_id) == [first.id]
    bad = client.get("/ai/notifications", {"isRead": "maybe"})
    assert bad.status_code == 400 and "isRead" in bad.json()["error"]["fields"]


def test_marking_read_needs_a_signed_in_user_and_post(user):
    notice = notice_of(user)
    assert APIClient().post(f"/ai/notifications/{notice.id}/read").status_code == 401
    assert user_client(user).get(f"/ai/notifications/{notice.id}/read").status_code == 405


def test_the_runtimes_final_failure_and_the_reapers_timeout_notify_the_user(
    runtime, user, django_capture_on_commit_callbacks
):
    from django.utils import timezone

    from ai_jobs import services
    from ai_jobs.models import AiRuntimeJob

    with django_capture_on_commit_callbacks(execute=True):
        retried = JobFactory(user=user)
        runtime.lock(retried.id)
        runtime.fail(retried.id, 1, "MODEL_TIMEOUT")  # back to pending: no notice yet
        final = JobFactory(user=user)
        runtime.lock(final.id)
        runtime.fail(final.id, 1, "MODEL_JSON_PARSE_FAILED")
        timed_out = JobFactory(user=user, max_retry_count=0)
        runtime.lock(timed_out.id)
        AiRuntimeJob.objects.filter(id=timed_out.id).update(lock_until=timezone.now() - timezone.timedelta(seconds=1))
        services.jobs_reap()
    notices = dict(Notification.objects.values_list("job_id", "data"))
    assert notices == {final.id: {"errorCode": "MODEL_JSON_PARSE_FAILED"}, timed_out.id: {"errorCode": "JOB_TIMEOUT"}}
