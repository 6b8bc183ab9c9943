"""The user's notices that a job finished (seed 002 v1.1 ``notifyJobComplete``).

A transaction that finishes a job calls ``notify_after_commit(job_id)``: once it
commits, the Celery task ``ai_jobs.tasks.notify_job_finished`` writes the notice
with ``notification_create_for_job``. A rolled-back transaction sends nothing. The
job row, not the message, says what happened, so the task can run twice (at most
one notice per job and kind) or late (it reads the job's final state).

The task is defined here, beside what enqueues it, and exported by ``ai_jobs.tasks``:
the services that finish jobs enqueue it, and the tasks module imports those
services, so defining it there would make the two import each other.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from celery import shared_task
from django.contrib.auth.models import AbstractBaseUser
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Count, QuerySet
from django.utils import timezone

from ai_jobs.models import (
    AiLearningAnalysis,
    AiRuntimeJob,
    CandidateStatus,
    FlashcardCandidate,
    JobStatus,
    JobType,
    NextActionRecommendation,
    Notification,
    NotificationKind,
    QuizQuestionCandidate,
    WeakPointCandidate,
)
from config.errors import DomainError, ErrorCode
from config.observability.context import bound
from config.observability.metrics import NOTIFICATIONS_FAILED

logger = logging.getLogger(__name__)

_KIND_OF_STATUS = {JobStatus.SUCCEEDED: NotificationKind.JOB_SUCCEEDED, JobStatus.FAILED: NotificationKind.JOB_FAILED}

_LABELS = {
    JobType.LEARNING_STATE_ANALYSIS: "Learning analysis",
    JobType.WEAK_POINT_ANALYSIS: "Weak-point analysis",
    JobType.NEXT_ACTION_PLANNING: "Study plan",
    JobType.QUIZ_GENERATION: "Quiz",
    JobType.FLASHCARD_GENERATION: "Flashcards",
}


# --- enqueue ------------------------------------------------------------------------------------


def notify_after_commit(job_id: str) -> None:
    """Notify the job's user once the current transaction commits (at once when
    there is none). Call it wherever a job reaches ``succeeded`` or a final
    ``failed``: the result, the runtime's final ``fail`` and the reaper's
    ``JOB_TIMEOUT``. A job that is not final when the task runs gets no notice."""
    transaction.on_commit(partial(_enqueue, job_id))


_TRANSIENT = (OperationalError, InterfaceError)


@shared_task(
    name="ai_jobs.tasks.notify_job_finished",
    bind=True,
    ignore_result=True,
    autoretry_for=_TRANSIENT,
    retry_backoff=True,
    max_retries=5,
)
def notify_job_finished(self, job_id: str) -> None:  # type: ignore[no-untyped-def]
    with bound(jobId=job_id):
        try:
            notification_create_for_job(job_id=job_id)
        except Exception as error:
            # Counted once it is given up on: not retried, or out of retries.
            if not isinstance(error, _TRANSIENT) or self.request.retries >= self.max_retries:
                NOTIFICATIONS_FAILED.inc()
            raise


def _enqueue(job_id: str) -> None:
    # Runs after commit: an error here must not turn a stored result into a 500.
    try:
        notify_job_finished.delay(job_id)
    except Exception:
        logger.warning("Could not enqueue the notification of job %s; writing it inline", job_id, exc_info=True)
        try:
            notification_create_for_job(job_id=job_id)
        except Exception:
            NOTIFICATIONS_FAILED.inc()
            logger.exception("The notification of job %s was lost", job_id, extra={"jobId": job_id})


# --- write ----------------------------------------------------------------------------------------


def notification_create_for_job(*, job_id: str) -> Notification | None:
    """The notice that a finished job is due, written once: a second call (a task
    delivered twice, two workers at once) returns the first notice. ``None`` for a
    missing job or one that is not succeeded/failed (a retry is pending; a
    cancellation is the user's own doing)."""
    job = AiRuntimeJob.objects.filter(id=job_id).first()
    if job is None or job.status not in _KIND_OF_STATUS:
        return None
    kind = _KIND_OF_STATUS[job.status]
    existing = Notification.objects.filter(job_id=job_id, kind=kind).first()
    if existing is not None:
        return existing
    title, message, data = _describe(job, kind)
    Notification.objects.bulk_create(
        [
            Notification(
                user_id=job.user_id,
                job_id=job.id,
                target_type=job.target_type,
                target_id=job.target_id,
                kind=kind,
                job_type=job.job_type,
                title=title,
                message=message,
                data=data,
            )
        ],
        ignore_conflicts=True,  # the unique (job, kind) decides between concurrent writers
    )
    return Notification.objects.filter(job_id=job_id, kind=kind).first()


def _candidate_counts(model: type[QuizQuestionCandidate] | type[FlashcardCandidate], job_id: str) -> dict[str, int]:
    counts = dict(model.objects.filter(job_id=job_id).values_list("status").annotate(n=Count("id")))
    return {
        "published": counts.get(CandidateStatus.PUBLISHED, 0),
        "duplicates": counts.get(CandidateStatus.DUPLICATE, 0),
    }


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _describe(job: AiRuntimeJob, kind: str) -> tuple[str, str, dict[str, Any]]:
    label = _LABELS.get(job.job_type, job.job_type)
    if kind == NotificationKind.JOB_FAILED:
        return f"{label} failed", "The job could not be completed.", {"errorCode": job.error_code}
    if job.job_type == JobType.LEARNING_STATE_ANALYSIS:
        analysis = AiLearningAnalysis.objects.filter(job_id=job.id).only("id", "mastery_score", "level").first()
        if analysis is None:
            return f"{label} ready", "", {}
        message = f"Mastery {analysis.mastery_score:g}/100, level {analysis.level}."
        return f"{label} ready", message, {"analysisId": analysis.id}
    if job.job_type == JobType.WEAK_POINT_ANALYSIS:
        count = WeakPointCandidate.objects.filter(job_id=job.id).count()
        return f"{label} ready", f"{_plural(count, 'weak point')} found.", {"weakPoints": count}
    if job.job_type == JobType.NEXT_ACTION_PLANNING:
        count = NextActionRecommendation.objects.filter(job_id=job.id).count()
        return f"{label} ready", f"{_plural(count, 'recommendation')}.", {"recommendations": count}
    if job.job_type in (JobType.QUIZ_GENERATION, JobType.FLASHCARD_GENERATION):
        quiz = job.job_type == JobType.QUIZ_GENERATION
        counts = _candidate_counts(QuizQuestionCandidate if quiz else FlashcardCandidate, job.id)
        noun = "question" if quiz else "flashcard"
        message = f"{_plural(counts['published'], 'new ' + noun)} published"
        if counts["duplicates"]:
            message += f", {_plural(counts['duplicates'], 'duplicate')} skipped"
        return f"{label} ready", message + ".", counts
    return f"{label} ready", "", {}


def notification_mark_read(*, user: AbstractBaseUser, notification_id: str) -> Notification:
    """Mark one of the user's notices read; reading it again keeps the first time.
    Another user's notice is not found, exactly as a missing one."""
    Notification.objects.filter(id=notification_id, user=user, read_at__isnull=True).update(read_at=timezone.now())
    notification = Notification.objects.filter(id=notification_id, user=user).first()
    if notification is None:
        raise DomainError(ErrorCode.NOT_FOUND, f"Notification {notification_id} not found")
    return notification


# --- read -----------------------------------------------------------------------------------------


def notification_list(
    *,
    user: AbstractBaseUser,
    target_type: str | None = None,
    target_id: str | None = None,
    job_id: str | None = None,
    is_read: bool | None = None,
) -> QuerySet[Notification]:
    notifications = Notification.objects.filter(user=user)
    if target_type is not None:
        notifications = notifications.filter(target_type=target_type)
    if target_id is not None:
        notifications = notifications.filter(target_id=target_id)
    if job_id is not None:
        notifications = notifications.filter(job_id=job_id)
    if is_read is not None:
        notifications = notifications.filter(read_at__isnull=not is_read)
    return notifications
