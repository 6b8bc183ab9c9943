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
from django.db.models import QuerySet
from django.utils import timezone

from ai_jobs import job_types, selectors
from ai_jobs.models import AiRuntimeJob, JobStatus, Notification, NotificationKind
from config.errors import DomainError, ErrorCode
from config.observability.context import bound
from config.observability.metrics import NOTIFICATIONS_FAILED

logger = logging.getLogger(__name__)

_KIND_OF_STATUS = {JobStatus.SUCCEEDED: NotificationKind.JOB_SUCCEEDED, JobStatus.FAILED: NotificationKind.JOB_FAILED}


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


def _describe(job: AiRuntimeJob, kind: str) -> tuple[str, str, dict[str, Any]]:
    """Title, message and data: the job type's label, and on success what its notice says."""
    declared = job_types.get(job.job_type)
    label = declared.label if declared is not None else job.job_type
    if kind == NotificationKind.JOB_FAILED:
        return f"{label} failed", "The job could not be completed.", {"errorCode": job.error_code}
    if declared is None:
        return f"{label} ready", "", {}
    message, data = declared.notice(job)
    return f"{label} ready", message, data


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
    notifications = selectors.job_linked(
        model=Notification, user=user, target_type=target_type, target_id=target_id, job_id=job_id
    )
    if is_read is not None:
        notifications = notifications.filter(read_at__isnull=not is_read)
    return notifications
