"""The user's notices that a job finished.

The notice is a row written in the job's own final transaction: the result's, the
runtime's final ``fail``, the reaper's ``JOB_TIMEOUT``. It is visible when that
transaction commits and never when it rolls back, and it costs one ``INSERT``,
not a Celery message per job and a worker that opens a connection to read the job
back. The unique ``(job, kind)`` with ``ON CONFLICT DO NOTHING`` keeps it to at
most one notice per job and kind.

``notify_job_finished`` stays a Celery task for the messages a version before this
one queued (it writes the notice from the job row, once); nothing enqueues it now.
It is defined here, beside what it calls, and exported by ``ai_jobs.tasks``.

Each notice is also pushed to the user's devices (contract 11.2): the same
transaction hands the outbox plain values (``delivery.services.push.pushes_write``:
one ``INSERT ... SELECT`` over the user's enabled devices), and the pushes go after
commit, off the request's path. Their words come from the translation catalogues
(``locale/``), one rendering per language of ``LANGUAGES``, never from the model's
output; whether the user still consents, and the badge (their unread notices), are
read when each push is sent (``push_recipient``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from celery import shared_task
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import InterfaceError, OperationalError
from django.db.models import QuerySet
from django.utils import timezone, translation
from django.utils.translation import gettext

from ai_jobs import job_types, selectors
from ai_jobs.models import AiRuntimeJob, JobStatus, Notification, NotificationKind
from ai_jobs.outputs.common import Stored
from config.errors import DomainError, ErrorCode
from config.ids import new_id
from config.observability.context import bound
from config.observability.metrics import NOTIFICATIONS_FAILED
from config.sql import insert_rows
from delivery.services import push
from quotas import selectors as quota_selectors

logger = logging.getLogger(__name__)

_KIND_OF_STATUS = {JobStatus.SUCCEEDED: NotificationKind.JOB_SUCCEEDED, JobStatus.FAILED: NotificationKind.JOB_FAILED}
FAILED_MESSAGE = "The job could not be completed."


# --- written in the job's final transaction -----------------------------------------------------


@dataclass(frozen=True)
class FinishedJob:
    """What a notice names of its job, as the final transition returned it."""

    id: str
    user_id: int
    job_type: str
    target_type: str
    target_id: str
    error_code: str | None = None


def _label(job_type: str) -> str:
    declared = job_types.get(job_type)
    return declared.label if declared is not None else job_type


def _row(job: FinishedJob | AiRuntimeJob, kind: str, title: str, message: str, data: dict[str, Any]) -> dict:
    return {
        "id": new_id("ntf"),
        "user_id": job.user_id,
        "job_id": job.id,
        "target_type": job.target_type,
        "target_id": job.target_id,
        "created_at": timezone.now(),
        "kind": kind,
        "job_type": job.job_type,
        "title": title,
        "message": message,
        "data": data,
        "read_at": None,
    }


def _insert(rows: list[dict[str, Any]], *, pushed: bool = True) -> None:
    # One statement; a second notice of the same job and kind is no row (the unique
    # constraint decides, also between concurrent writers).
    insert_rows(Notification, rows, suffix="ON CONFLICT DO NOTHING")
    if not pushed:
        return
    push.pushes_write_many(
        events=[
            push.PushEvent(
                user_id=row["user_id"],
                event_id=row["id"],
                payload={
                    "jobId": row["job_id"],
                    "notificationId": row["id"],
                    "jobType": row["job_type"],
                    "status": JobStatus.SUCCEEDED if _succeeded(row) else JobStatus.FAILED,
                    "words": push_words(job_type=row["job_type"], succeeded=_succeeded(row)),
                },
            )
            for row in rows
        ]
    )


def _succeeded(row: dict[str, Any]) -> bool:
    return row["kind"] == NotificationKind.JOB_SUCCEEDED


@cache
def push_words(*, job_type: str, succeeded: bool) -> dict[str, dict[str, str]]:
    """What a push says, in each language of ``LANGUAGES``: the job type in the
    learner's words and whether it succeeded."""
    words = {}
    for language, _name in settings.LANGUAGES:
        with translation.override(language):
            job = gettext(_label(job_type))
            if succeeded:
                title, body = gettext("%(job)s ready") % {"job": job}, gettext("Open the app to see what it made.")
            else:
                title, body = gettext("%(job)s failed") % {"job": job}, gettext("The job could not be completed.")
        words[language] = {"title": title, "body": body}
    return words


def push_recipient(user_id: int) -> push.Recipient:
    """Read as each push is sent: does the user consent now, and their unread notices."""
    consents = quota_selectors.ai_settings_get(user_id=user_id).ai_analysis_enabled
    unread = Notification.objects.filter(user_id=user_id, read_at__isnull=True).count()
    return push.Recipient(consents=consents, badge=unread)


def notification_write_succeeded(*, job: AiRuntimeJob, stored: Stored = None, pushed: bool = True) -> None:
    """The success notice, inside the result's transaction. ``stored`` is what the
    job type's store returned: its notice says it without reading the rows back. A
    notice function that fails is counted (``aijobs_notifications_failed_total``)
    and the notice is written with its title only: a notice is never worth the result.
    ``pushed`` false: the caller knows the user has no device, so no push is written."""
    row = _row(job, NotificationKind.JOB_SUCCEEDED, f"{_label(job.job_type)} ready", *_success(job, stored))
    _insert([row], pushed=pushed)


def _success(job: AiRuntimeJob, stored: Stored) -> tuple[str, dict[str, Any]]:
    declared = job_types.get(job.job_type)
    if declared is None:
        return "", {}
    try:
        return declared.notice(job) if stored is None else declared.notice(job, stored)
    except Exception:
        NOTIFICATIONS_FAILED.inc()
        logger.exception("The notice of job %s could not say what it made", job.id, extra={"jobId": job.id})
        return "", {}


def notification_write_failed(*, jobs: Sequence[FinishedJob]) -> None:
    """The failure notices of jobs that just ended ``failed``, in the transaction
    that failed them: one statement for all of them."""
    _insert(
        [
            _row(job, NotificationKind.JOB_FAILED, f"{_label(job.job_type)} failed", FAILED_MESSAGE,
                 {"errorCode": job.error_code})
            for job in jobs
        ]
    )  # fmt: skip


# --- the task of earlier versions ------------------------------------------------------------------


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


def notification_create_for_job(*, job_id: str) -> Notification | None:
    """The notice that a finished job is due, written from the job row once: a
    second call returns the first notice. ``None`` for a missing job or one that is
    not succeeded/failed (a retry is pending; a cancellation is the user's own doing).
    The final transactions write their notices themselves; this serves the queued
    messages of earlier versions and a job finished without one."""
    job = AiRuntimeJob.objects.filter(id=job_id).first()
    if job is None or job.status not in _KIND_OF_STATUS:
        return None
    kind = _KIND_OF_STATUS[job.status]
    existing = Notification.objects.filter(job_id=job_id, kind=kind).first()
    if existing is not None:
        return existing
    if kind == NotificationKind.JOB_FAILED:
        notification_write_failed(
            jobs=[FinishedJob(job.id, job.user_id, job.job_type, job.target_type, job.target_id, job.error_code)]
        )
    else:
        notification_write_succeeded(job=job)
    return Notification.objects.filter(job_id=job_id, kind=kind).first()


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
