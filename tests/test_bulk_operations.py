"""Bulk operations by filter (contract section 12): the operation acts on exactly the
jobs the admin's job list shows under the same filters; each rerun follows the single
rerun's rules; a job already rerun is skipped, never rerun twice; the record's counts
add up; the commands do the same with their options; each button needs the permission
of what it changes."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.db import connection
from django.http import QueryDict
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.selectors import public_id_of
from ai_jobs import services, tasks
from ai_jobs.admin_operations import filter_of_list
from ai_jobs.models import AiRuntimeJob, BulkOperation
from ai_jobs.services import bulk
from tests.support.api import RuntimeClient
from tests.support.factories import JobFactory, UserFactory, consent

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

LIST = "/admin/ai_jobs/airuntimejob/"


@pytest.fixture
def operator() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("operator", "op@example.com", "pw"))
    return client


def _failed(user=None, **fields) -> AiRuntimeJob:
    fields.setdefault("error_code", "MODEL_TIMEOUT")
    return JobFactory(status="failed", **({"user": user} if user else {}), **fields)


def _counts(operation: BulkOperation) -> tuple[int, int, int, int]:
    operation.refresh_from_db()
    return operation.matched, operation.done, operation.refused, operation.skipped


def test_an_operation_matches_exactly_the_jobs_the_list_shows(operator):
    alice, bob = UserFactory(username="alice-reader"), UserFactory(username="bob")
    for user in (alice, bob):
        consent(user)
    march = timezone.make_aware(dt.datetime(2026, 3, 14, 12))
    _failed(alice)
    _failed(alice, job_type="quiz_generation", target_type="knowledge_base", target_id="kb_1")
    _failed(bob, error_code="MODEL_RATE_LIMIT", api_key_mode="user_deepseek_key", credential_id="cred_1")
    _failed(bob, created_at=march)
    _failed(alice, created_at=march + dt.timedelta(days=40))
    JobFactory(user=bob, status="succeeded")
    JobFactory(user=alice)  # pending
    queries = [
        "status__exact=failed",
        "status__exact=failed&job_type__exact=quiz_generation",
        "status__exact=failed&error_code=MODEL_RATE_LIMIT",
        "status__exact=failed&api_key_mode__exact=user_deepseek_key",
        f"status__exact=failed&user={alice.username}",
        f"status__exact=failed&user={public_id_of(bob)}",
        "status__exact=failed&created_at__year=2026&created_at__month=3",
        "status__exact=failed&created_at__gte=2026-03-01&created_at__lt=2026-04-01",
        "status__exact=failed&q=reader",
        "status__exact=failed&q=MODEL_TIMEOUT alice",
        "job_type__exact=learning_state_analysis",
    ]
    for query in queries:
        listed = operator.get(f"{LIST}?{query}")
        assert listed.status_code == 200, query
        shown = {job.id for job in listed.context["cl"].queryset if job.status == "failed"}
        matched = services.operation_jobs(kind="rerun", job_filter=filter_of_list(QueryDict(query)))
        assert set(matched.values_list("id", flat=True)) == shown, query
        confirm = operator.get(f"{LIST}bulk/rerun/?{query}")
        assert confirm.context["matched"] == len(shown), query


def test_a_list_filter_the_operation_cannot_apply_is_refused_not_ignored(operator):
    _failed()
    answer = operator.get(f"{LIST}bulk/rerun/?status__exact=failed&locked_by=runtime-1", follow=True)
    assert "cannot be used by a bulk operation" in answer.content.decode()
    assert operator.post(f"{LIST}bulk/rerun/?locked_by=runtime-1").status_code == 302
    assert not BulkOperation.objects.exists()


def test_the_admin_records_the_operation_in_the_log_and_queues_its_task(operator, django_capture_on_commit_callbacks):
    failed = [_failed() for _ in range(3)]
    with django_capture_on_commit_callbacks() as queued:
        answer = operator.post(f"{LIST}bulk/rerun/?status__exact=failed&error_code=MODEL_TIMEOUT")
    operation = BulkOperation.objects.get()
    assert answer.status_code == 302 and answer["Location"].endswith(f"/bulkoperation/{operation.id}/change/")
    assert len(queued) == 1 and operation.finished_at is None and operation.created_by.username == "operator"
    assert operation.filter == {"status": "failed", "error_code": "MODEL_TIMEOUT"}
    entry = LogEntry.objects.get(object_id=operation.id)
    assert operation.id in entry.change_message and "rerun" in entry.change_message

    tasks.run_bulk_operation(operation.id)  # what the queued message runs
    assert _counts(operation) == (3, 3, 0, 0)
    assert operation.finished_at is not None
    tasks.run_bulk_operation(operation.id)  # delivered twice: taken once
    assert _counts(operation) == (3, 3, 0, 0)
    for job in failed:
        job.refresh_from_db()
        assert AiRuntimeJob.objects.get(id=job.rerun_as_id).retried_from_job_id == job.id
    page = operator.get(f"/admin/ai_jobs/bulkoperation/{operation.id}/change/").content.decode()
    assert operation.id in page
    listed = operator.get("/admin/ai_jobs/bulkoperation/").content.decode()
    assert "Bulk operations" in listed and "error_code=MODEL_TIMEOUT" in listed


def test_the_rerun_command_follows_the_single_reruns_rules_and_never_reruns_twice():
    consenting, withdrawn = UserFactory(), UserFactory()
    consent(consenting)
    ones = [_failed(consenting, params={"topic": "fractions [standin:429]"}) for _ in range(7)]
    refused = _failed(withdrawn, consented=False)
    _failed(consenting, error_code="MODEL_RATE_LIMIT")  # another code: not matched
    JobFactory(user=consenting, status="succeeded", error_code=None)

    dry = StringIO()
    call_command("rerun_jobs", "--error-code", "MODEL_TIMEOUT", "--dry-run", stdout=dry)
    assert "dry run: 8 failed job(s) match" in dry.getvalue()
    assert not AiRuntimeJob.objects.filter(retried_from_job__isnull=False).exists()

    out = StringIO()
    call_command("rerun_jobs", "--error-code", "MODEL_TIMEOUT", "--batch-size", "3", stdout=out)
    assert "matched 8, done 7, refused 1, skipped 0" in out.getvalue()
    for job in ones:
        rerun = AiRuntimeJob.objects.get(retried_from_job=job)
        assert rerun.status == "pending" and rerun.params == {"topic": "fractions"}
    refused.refresh_from_db()
    assert refused.rerun_as_id is None

    again = StringIO()
    call_command("rerun_jobs", "--error-code", "MODEL_TIMEOUT", stdout=again)
    assert "matched 8, done 0, refused 1, skipped 7" in again.getvalue()
    assert AiRuntimeJob.objects.filter(retried_from_job__isnull=False).count() == 7
    for operation in BulkOperation.objects.all():
        assert operation.done + operation.refused + operation.skipped == operation.matched


def test_the_commands_take_the_list_filters_and_refuse_a_bad_one():
    alice = UserFactory(username="alice")
    consent(alice)
    old = _failed(alice, created_at=timezone.make_aware(dt.datetime(2026, 1, 5)))
    _failed(alice, job_type="weak_point_analysis")
    _failed(UserFactory())
    out = StringIO()
    call_command(
        "rerun_jobs", "--user", "alice", "--job-type", "learning_state_analysis", "--until", "2026-02-01", stdout=out
    )
    assert "matched 1, done 1" in out.getvalue() and AiRuntimeJob.objects.filter(retried_from_job=old).exists()
    with pytest.raises(CommandError, match="job_type: not one of"):
        call_command("rerun_jobs", "--job-type", "quiz", stdout=StringIO())
    with pytest.raises(CommandError, match="since: not a date"):
        call_command("cancel_jobs", "--since", "yesterday", stdout=StringIO())


def test_a_command_run_for_an_operator_is_theirs_in_the_record_and_the_admin_log():
    consent(alice := UserFactory(username="alice"))
    _failed(alice)
    staff = get_user_model().objects.create_user("ops-kim", "kim@example.com", "pw", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(codename="add_airuntimejob"))
    get_user_model().objects.create_user("learner-lee", "lee@example.com", "pw")  # not staff
    call_command("rerun_jobs", "--user", "alice", "--operator", "ops-kim", stdout=StringIO())
    operation = BulkOperation.objects.get()
    assert operation.created_by == staff and _counts(operation) == (1, 1, 0, 0)
    entry = LogEntry.objects.get(object_id=operation.id)
    assert entry.user == staff and operation.id in entry.change_message

    call_command("rerun_jobs", "--user", "alice", stdout=StringIO())  # nobody named: recorded, not in the log
    assert BulkOperation.objects.count() == 2 and LogEntry.objects.count() == 1
    for name, refusal in (
        ("nobody", "not an active staff user"),
        ("learner-lee", "not an active staff user"),
        ("ops-kim", "lacks the permission ai_jobs.change_airuntimejob"),  # may rerun, may not cancel
    ):
        with pytest.raises(CommandError, match=refusal):
            call_command("cancel_jobs", "--user", "alice", "--operator", name, stdout=StringIO())
    assert BulkOperation.objects.count() == 2 and LogEntry.objects.count() == 1


def test_the_cancel_command_cancels_pending_asks_running_and_skips_the_rest_again():
    pending = [JobFactory(job_type="quiz_generation", target_type="knowledge_base", target_id="kb") for _ in range(3)]
    running = JobFactory(job_type="quiz_generation", target_type="knowledge_base", target_id="kb")
    other = JobFactory()
    runtime = RuntimeClient()
    assert runtime.lock(running.id).status_code == 200
    out = StringIO()
    call_command("cancel_jobs", "--job-type", "quiz_generation", stdout=out)
    assert "matched 4, done 4, refused 0, skipped 0" in out.getvalue()
    assert {AiRuntimeJob.objects.get(id=job.id).status for job in pending} == {"cancelled"}
    assert runtime.heartbeat(running.id).json()["cancelRequested"] is True
    assert AiRuntimeJob.objects.get(id=other.id).status == "pending"
    again = StringIO()
    call_command("cancel_jobs", "--job-type", "quiz_generation", stdout=again)
    assert "matched 1, done 0, refused 0, skipped 1" in again.getvalue()


def _staff(username: str, *codenames: str) -> Client:
    user = get_user_model().objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def test_each_button_needs_the_permission_of_what_it_changes():
    _failed()
    viewer = _staff("viewer", "view_airuntimejob")
    page = viewer.get(LIST).content.decode()
    assert "Rerun all failed matching" not in page and "Cancel all matching" not in page
    assert viewer.get(f"{LIST}bulk/rerun/").status_code == 403
    assert viewer.post(f"{LIST}bulk/cancel/").status_code == 403
    canceller = _staff("canceller", "view_airuntimejob", "change_airuntimejob")
    page = canceller.get(LIST).content.decode()
    assert "Cancel all matching" in page and "Rerun all failed matching" not in page
    assert canceller.post(f"{LIST}bulk/rerun/").status_code == 403
    assert canceller.post(f"{LIST}bulk/cancel/?status__exact=pending").status_code == 302
    assert not BulkOperation.objects.filter(kind="rerun").exists()
    assert BulkOperation.objects.filter(kind="cancel").count() == 1


def test_a_batch_of_reruns_costs_the_same_statements_however_many_jobs():
    user = UserFactory()
    consent(user)

    def statements(count: int) -> int:
        ids = [_failed(user).id for _ in range(count)]
        with CaptureQueriesContext(connection) as captured:
            done = services.jobs_rerun(job_ids=ids)
        assert len(done.created) == count
        return len(captured.captured_queries)

    assert statements(40) == statements(4)


def _stop_after(monkeypatch, batches: int) -> None:
    """The run's worker is lost after ``batches`` batches committed: the next batch's work
    raises out of the run (as a killed process leaves it: the record unfinished)."""
    real = bulk._rerun_batch
    done = [0]

    def batch(job_ids: list[str]) -> bulk.BatchCounts:
        if done[0] == batches:
            raise SystemExit("worker lost")
        done[0] += 1
        return real(job_ids)

    monkeypatch.setattr(bulk, "_rerun_batch", batch)


def test_an_operation_whose_run_stopped_goes_on_from_its_cursor_once_stalled(settings, monkeypatch):
    consent(user := UserFactory())
    failed = sorted((_failed(user) for _ in range(7)), key=lambda job: job.id)
    operation = services.bulk_operation_start(kind="rerun", job_filter={"status": "failed"}, by=None)
    _stop_after(monkeypatch, 2)
    with pytest.raises(SystemExit):
        services.bulk_operation_run(operation_id=operation.id, batch_size=2)
    monkeypatch.undo()
    assert _counts(operation) == (7, 4, 0, 0) and operation.cursor == failed[3].id and operation.finished_at is None

    # While its run may still be at work, nothing takes it over.
    assert services.bulk_operations_stalled() == []
    assert services.bulk_operation_run(operation_id=operation.id, batch_size=2) is None
    settings.BULK_OPERATION_STALL_SECONDS = 0  # now it has stalled
    settings.CELERY_TASK_ALWAYS_EAGER = True
    assert services.bulk_operations_stalled() == [operation.id]
    tasks.resume_bulk_operations()  # beat's task: the run, queued again (eager here)
    assert _counts(operation) == (7, 7, 0, 0) and operation.finished_at is not None
    for job in failed:  # each rerun once: the batches before the stop were not done again
        assert AiRuntimeJob.objects.filter(retried_from_job_id=job.id).count() == 1
    assert services.bulk_operations_stalled() == []


def test_an_operation_whose_message_was_lost_is_queued_again_by_beat(settings):
    consent(user := UserFactory())
    _failed(user), _failed(user)
    operation = services.bulk_operation_start(kind="rerun", job_filter={"status": "failed"}, by=None)
    assert services.bulk_operations_stalled() == []  # just made: its message is on its way
    settings.BULK_OPERATION_STALL_SECONDS = 0
    settings.CELERY_TASK_ALWAYS_EAGER = True
    tasks.resume_bulk_operations()
    assert _counts(operation) == (2, 2, 0, 0) and operation.finished_at is not None


def test_a_run_taken_over_commits_no_batch_of_its_own(settings, monkeypatch):
    """Two runs never both count a batch: the one whose operation another run took over
    rolls its batch back and stops."""
    consent(user := UserFactory())
    failed = sorted((_failed(user) for _ in range(4)), key=lambda job: job.id)
    operation = services.bulk_operation_start(kind="rerun", job_filter={"status": "failed"}, by=None)
    real = bulk._rerun_batch

    def taken_over_meanwhile(job_ids: list[str]) -> bulk.BatchCounts:
        counts = real(job_ids)
        if job_ids[0] == failed[2].id:  # the second batch: another run takes the operation
            BulkOperation.objects.filter(id=operation.id).update(runner="run_other")
        return counts

    monkeypatch.setattr(bulk, "_rerun_batch", taken_over_meanwhile)
    assert services.bulk_operation_run(operation_id=operation.id, batch_size=2) is None
    assert _counts(operation) == (4, 2, 0, 0) and operation.cursor == failed[1].id
    # The second batch's reruns were rolled back with it: the run that holds it makes them.
    assert not AiRuntimeJob.objects.filter(retried_from_job_id__in=[failed[2].id, failed[3].id]).exists()
