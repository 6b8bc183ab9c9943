"""Retention: ``prune_data`` and the beat task delete, in bounded
batches, snapshots of jobs finished past ``AI_SNAPSHOT_RETENTION_DAYS``, finished jobs
with their results and logs past ``AI_JOB_RETENTION_DAYS`` (the user's outputs stay,
with their ``jobId``), notifications past ``AI_NOTIFICATION_RETENTION_DAYS`` and
model-asynch tasks nobody picked up past ``ASYNCH_UNCLAIMED_RETENTION_SECONDS``, with
their files, the admin's login records (attempts past the cool-off, logs past 90
days), used-up refresh tokens once expired and daily counters past
``AI_COUNTER_RETENTION_DAYS``; ``--dry-run`` counts exactly what the
real run deletes."""

from __future__ import annotations

import datetime as dt
import io
import re
import threading

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.conf import settings as django_settings
from django.core.files.storage import storages
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from ai_jobs.models import (
    AiInvocationLog,
    AiJobSnapshot,
    AiLearningAnalysis,
    AiRuntimeJob,
    AiRuntimeResult,
    Flashcard,
    FlashcardCandidate,
    NextActionRecommendation,
    Notification,
    QueueSample,
    QuizQuestion,
    QuizQuestionCandidate,
    RuntimeInstance,
    WeakPointCandidate,
)
from ai_jobs.services import retention as jobs
from asynch.models import AsynchTask, TaskState
from asynch.storage import DjangoResultStorage, ResultFile
from config.retention import sweep_run
from delivery.models import Delivery, DeliveryAttempt
from ops import retention
from ops.tasks import prune_data
from tests.support.asynch_fixtures import tenant_client
from tests.support.retention import age_job, age_tokens, counters_aged, learner_with_everything

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

LISTS = {
    "learning_state_analysis": ("analyses", AiLearningAnalysis),
    "weak_point_analysis": ("weak-points", WeakPointCandidate),
    "next_action_planning": ("recommendations", NextActionRecommendation),
    "quiz_generation": ("quizzes", QuizQuestion),
    "flashcard_generation": ("flashcards", Flashcard),
}


def prune(*args: str) -> dict[str, int]:
    """``manage.py prune_data`` as an operator runs it: the rows per kind it printed."""
    out = io.StringIO()
    call_command("prune_data", *args, stdout=out)
    printed = dict(re.findall(r"^(\w+): (?:would delete|deleted) ([\d,]+)", out.getvalue(), re.M))
    return {kind: int(n.replace(",", "")) for kind, n in printed.items()}


def unclaimed_task(tenant, *, finished_days_ago: float, state: int = TaskState.SUCCEEDED) -> AsynchTask:
    """A model-asynch task that finished with a stored result file."""
    task = AsynchTask.objects.create(tenant=tenant, model_name="model-service", state=state)
    ref = DjangoResultStorage().save(
        ResultFile(task_id=task.id, tenant_id=tenant.id, content=b'{"ok": true}', content_type="application/json"),
        forward_headers={},
    )
    finished = timezone.now() - dt.timedelta(days=finished_days_ago)
    AsynchTask.objects.filter(id=task.id).update(oss_file=ref, finished_at=finished)
    task.refresh_from_db()
    return task


def test_jobs_finished_8_days_ago_lose_their_snapshots_and_keep_everything_else(runtime):
    learner = learner_with_everything(runtime)
    for job in learner.jobs.values():
        age_job(job, days=8)
    snapshots = [job.snapshot_id for job in learner.jobs.values()]
    outputs_before = {model: model.objects.count() for _, model in LISTS.values()}

    assert prune()["snapshots"] == 5

    assert not AiJobSnapshot.objects.filter(id__in=snapshots).exists()
    jobs = AiRuntimeJob.objects.filter(id__in=[job.id for job in learner.jobs.values()])
    assert jobs.count() == 5 and set(jobs.values_list("snapshot_id", flat=True)) == {None}
    assert AiRuntimeResult.objects.filter(job__in=jobs).count() == 5
    assert AiInvocationLog.objects.filter(job__in=jobs).count() == 5
    assert Notification.objects.filter(job_id__in=jobs.values("id")).count() == 5
    assert {model: model.objects.count() for _, model in LISTS.values()} == outputs_before
    # A pending job's snapshot, a recent job's, and one a rebuild replaced today stay.
    for job in (learner.pending, learner.cancelled, learner.failed):
        assert AiJobSnapshot.objects.filter(id=job.snapshot_id).exists()
    assert prune()["snapshots"] == 0


def test_jobs_finished_91_days_ago_go_with_results_and_logs_and_the_outputs_still_list_with_their_job_id(runtime):
    learner = learner_with_everything(runtime)
    old = [*learner.jobs.values(), learner.failed]
    for job in old:
        age_job(job, days=91)
    old_ids = [job.id for job in old]
    candidates = QuizQuestionCandidate.objects.count() + FlashcardCandidate.objects.count()
    assert candidates == 2

    pruned = prune()

    assert pruned["jobs"] == 6 + 5 + 5 + candidates  # jobs, results, logs, the candidates they stored
    assert pruned["notifications"] == 6  # sent when those jobs finished, 91 days ago
    assert not AiRuntimeJob.objects.filter(id__in=old_ids).exists()
    assert not AiRuntimeResult.objects.filter(job_id__in=old_ids).exists()
    assert not AiInvocationLog.objects.filter(job_id__in=old_ids).exists()
    assert not QuizQuestionCandidate.objects.exists() and not FlashcardCandidate.objects.exists()
    learner.rerun.refresh_from_db()
    assert learner.rerun.retried_from_job_id is None  # the rerun stays, its source gone
    for job_type, (path, model) in LISTS.items():
        job_id = learner.jobs[job_type].id
        listed = learner.learner.get(f"/ai/{path}").json()["results"]
        assert [row["jobId"] for row in listed] == [job_id], path
        assert learner.learner.get(f"/ai/{path}", jobId=job_id).json()["results"] == listed
        assert model.objects.get(job_id=job_id).user == learner.user
    # What is still running or recent is untouched.
    assert AiRuntimeJob.objects.filter(id__in=[learner.pending.id, learner.cancelled.id, learner.rerun.id]).count() == 3


def test_a_dry_run_counts_exactly_what_the_real_run_then_deletes(runtime, django_capture_on_commit_callbacks):
    first = learner_with_everything(runtime, tag="first")
    second = learner_with_everything(runtime, tag="second")
    for job in first.jobs.values():
        age_job(job, days=91)
    for job in second.jobs.values():
        age_job(job, days=8)
    age_job(second.failed, days=40)  # its snapshot and notices go, the job stays
    age_tokens(first.user, days=1)  # its used-up refresh token expired: refusing it needs no row
    tenant = tenant_client("biz").tenant
    old_tasks = [unclaimed_task(tenant, finished_days_ago=8) for _ in range(3)]
    kept_tasks = [
        unclaimed_task(tenant, finished_days_ago=6),
        unclaimed_task(tenant, finished_days_ago=30, state=TaskState.DOWNLOADED),  # the cleaner's, by expireAt
    ]
    now = timezone.now()
    QueueSample.objects.bulk_create(QueueSample(minute=now - dt.timedelta(days=3, minutes=m)) for m in range(4))
    QueueSample.objects.create(minute=now.replace(second=0, microsecond=0))
    RuntimeInstance.objects.create(instance_id="gone", last_seen_at=now - dt.timedelta(days=8))
    RuntimeInstance.objects.create(instance_id="alive", last_seen_at=now)
    # The admin's login records: an attempt past the cool-off, logs past their 90 days.
    AccessAttempt.objects.filter(username=first.user.username).update(attempt_time=now - dt.timedelta(minutes=16))
    for model in (AccessLog, AccessFailureLog):
        model.objects.filter(username=first.user.username).update(attempt_time=now - dt.timedelta(days=91))
    counters_aged(days=[0, 402, 403], now=now)  # daily counters: two of each past their 400 days
    old_deliveries = deliveries_aged(now=now)

    dry = prune("--dry-run")
    assert all(dry.values()), dry  # something of every kind is due
    with django_capture_on_commit_callbacks(execute=True):
        real = prune()
    assert real == dry
    assert dry["snapshots"] == 5 + 5 + 1 and dry["asynchUnclaimed"] == 3 and dry["queueSamples"] == 4
    assert (dry["adminLoginAttempts"], dry["adminLoginLogs"], dry["adminLoginFailures"]) == (2, 1, 1)  # 2: its expiry
    assert dry["expiredTokens"] == 2  # the outstanding token and its blacklist row; the second learner's stay
    assert [dry[kind] for kind in ("userUsage", "platformUsage", "asynchStats", "breakerEvents")] == [2, 2, 2, 2]
    assert dry["deliveries"] == 2 + 1  # two finished past their 30 days, and the attempt of one
    assert prune("--dry-run") == dict.fromkeys(dry, 0)
    assert not Delivery.objects.filter(id__in=old_deliveries).exists()
    kept = Delivery.objects.exclude(status="pending")  # what is left is open, or finished within its 30 days
    assert {"pending", "delivered"} <= set(Delivery.objects.values_list("status", flat=True))
    assert all(finished > now - dt.timedelta(days=30) for finished in kept.values_list("finished_at", flat=True))

    storage = storages[django_settings.ASYNCH_STORAGE_ALIAS]
    assert not any(storage.exists(task.oss_file) for task in old_tasks)  # the files went with their tasks
    assert all(storage.exists(task.oss_file) for task in kept_tasks)
    assert set(AsynchTask.objects.values_list("id", flat=True)) == {task.id for task in kept_tasks}
    instances = set(RuntimeInstance.objects.values_list("instance_id", flat=True))
    assert "alive" in instances and "gone" not in instances
    for model in (AccessAttempt, AccessLog, AccessFailureLog):
        assert set(model.objects.values_list("username", flat=True)) == {second.user.username}


def deliveries_aged(*, now: dt.datetime) -> list[str]:
    """Two deliveries finished 31 days ago (delivered, dropped), one delivered now and one
    still pending since then: what DELIVERY_RETENTION_DAYS (30) deletes and keeps."""
    made = []
    for n, (status, finished_days) in enumerate(
        [("delivered", 31), ("dropped", 31), ("delivered", 0), ("pending", None)]
    ):
        delivery = Delivery.objects.create(
            kind="push", event_id=f"ntf_retention_{n}", receiver_id="dev_retention", owner_id="0",
            status=status, created_at=now - dt.timedelta(days=40),
            finished_at=None if finished_days is None else now - dt.timedelta(days=finished_days),
        )  # fmt: skip
        made.append(delivery.id)
    DeliveryAttempt.objects.create(delivery_id=made[0], number=1, started_at=now, outcome="delivered")
    return made[:2]


def test_every_finished_delivery_goes_when_delivery_retention_days_is_0(settings):
    now = timezone.now()
    deliveries_aged(now=now)
    settings.DELIVERY_RETENTION_DAYS = 0
    assert retention.data_prune(now=now).kinds["deliveries"] == {"delivery.Delivery": 3, "delivery.DeliveryAttempt": 1}
    assert list(Delivery.objects.values_list("status", flat=True)) == ["pending"]


def test_the_same_per_table_counts_from_the_service(runtime, django_capture_on_commit_callbacks):
    learner = learner_with_everything(runtime)
    for job in learner.jobs.values():
        age_job(job, days=100)
    now = timezone.now()
    dry = retention.data_prune(dry_run=True, now=now)
    with django_capture_on_commit_callbacks(execute=True):
        real = retention.data_prune(now=now)
    assert real.kinds == dry.kinds
    assert dry.kinds["jobs"] == {
        "ai_jobs.AiRuntimeJob": 5,
        "ai_jobs.AiRuntimeResult": 5,
        "ai_jobs.AiInvocationLog": 5,
        "ai_jobs.QuizQuestionCandidate": 1,
        "ai_jobs.FlashcardCandidate": 1,
    }


def test_a_backlog_goes_in_bounded_batches_each_its_own_transaction(runtime, settings):
    settings.RETENTION_BATCH_SIZE = 2
    learner = learner_with_everything(runtime)
    for job in learner.jobs.values():
        age_job(job, days=91)
    batches: list[int] = []
    report = retention.data_prune(progress=lambda kind, deleted, n: batches.append(n) if kind == "jobs" else None)
    assert report.kinds["jobs"]["ai_jobs.AiRuntimeJob"] == 5
    assert batches == [1, 2, 3]  # 2 + 2 + 1 jobs


def test_the_command_shows_progress_and_every_table(runtime, settings, monkeypatch):
    from ops.management.commands import prune_data as command

    monkeypatch.setattr(command, "PROGRESS_EVERY_SECONDS", 0)
    settings.RETENTION_BATCH_SIZE = 2
    learner = learner_with_everything(runtime)
    for job in learner.jobs.values():
        age_job(job, days=91)
    out = io.StringIO()
    call_command("prune_data", stdout=out)
    printed = out.getvalue()
    assert "  jobs: " in printed and "(3 batches" in printed
    assert re.search(r"^jobs: deleted 17 \(.*AI runtime results 5.*\)$", printed, re.M), printed


def test_beat_runs_retention_every_retention_interval(runtime):
    entry = django_settings.CELERY_BEAT_SCHEDULE["prune-data"]
    assert entry["task"] == prune_data.name == "ops.tasks.prune_data"
    assert (
        entry["schedule"] == dt.timedelta(seconds=django_settings.RETENTION_INTERVAL_SECONDS) == dt.timedelta(hours=1)
    )
    learner = learner_with_everything(runtime)
    age_job(learner.jobs["quiz_generation"], days=91)
    assert prune_data()["jobs"]["ai_jobs.AiRuntimeJob"] == 1
    assert not AiRuntimeJob.objects.filter(id=learner.jobs["quiz_generation"].id).exists()


@pytest.mark.django_db(transaction=True)
def test_a_job_someone_is_writing_is_skipped_and_goes_on_the_next_run(runtime):
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's")
    learner = learner_with_everything(runtime)
    for job in learner.jobs.values():
        age_job(job, days=91)
    busy = learner.jobs["learning_state_analysis"].id
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction.atomic():
            AiRuntimeJob.objects.select_for_update().get(id=busy)
            locked.set()
            release.wait(10)
        connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        first = sweep_run(jobs.JOBS, now=timezone.now(), batch_size=100)
    finally:
        release.set()
        holder.join()
    assert first["ai_jobs.AiRuntimeJob"] == 4
    assert sweep_run(jobs.JOBS, now=timezone.now(), batch_size=100)["ai_jobs.AiRuntimeJob"] == 1
    assert not AiRuntimeJob.objects.filter(id=busy).exists()
