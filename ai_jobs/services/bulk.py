"""Bulk operations (contract section 12): rerun every failed job, or cancel every
pending or running job, matching a filter, however many. The operation is a row
written at once (who, when, the filter); a Celery task (or the command) works through
the matching jobs in batches by id, each batch by the single rerun's and cancel's own
services (``jobs_rerun``, ``jobs_cancel``), and counts what each job came to."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from django.conf import settings
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F, Q, QuerySet, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from ai_jobs import job_types, selectors
from ai_jobs.models import (
    ACTIVE_STATUSES,
    AiRuntimeJob,
    ApiKeyMode,
    BulkOperation,
    BulkOperationKind,
    JobStatus,
    TargetType,
)
from ai_jobs.services.jobs import jobs_cancel, jobs_rerun
from config.errors import DomainError, ErrorCode
from config.ids import new_id

logger = logging.getLogger(__name__)

BATCH_SIZE = 500
# Who may start one (from the admin, or named by the command's --operator).
BULK_OPERATION_PERMISSION = {
    BulkOperationKind.RERUN: "ai_jobs.add_airuntimejob",  # a rerun makes new jobs, as the single one does
    BulkOperationKind.CANCEL: "ai_jobs.change_airuntimejob",
}
CANCELLABLE = (JobStatus.PENDING.value, *ACTIVE_STATUSES)
_CHOICES = {
    "status": JobStatus.values,
    "api_key_mode": ApiKeyMode.values,
    "target_type": TargetType.values,
    "cancel_requested": ["true", "false"],
}


def _moment(value: str, field: str) -> str:
    """An ISO 8601 datetime or date (a date is its midnight in the current time zone)."""
    moment = parse_datetime(value)
    if moment is None and (day := parse_date(value)) is not None:
        moment = dt.datetime.combine(day, dt.time.min)
    if moment is None:
        raise DomainError(
            ErrorCode.VALIDATION_ERROR,
            f"{field}: not a date or time: {value!r}",
            fields={field: ["A date or time (ISO 8601)."]},
        )
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment.isoformat()


def job_filter_clean(raw: Mapping[str, str | None]) -> dict[str, str]:
    """A bulk operation's filter, checked: only ``selectors.JOB_FILTER_KEYS``, each value
    one it can take; empty values are left out."""
    unknown = sorted(set(raw) - set(selectors.JOB_FILTER_KEYS))
    if unknown:
        raise DomainError(
            ErrorCode.VALIDATION_ERROR,
            f"Not a filter of a bulk operation: {', '.join(unknown)}",
            fields={key: [f"One of {', '.join(selectors.JOB_FILTER_KEYS)}."] for key in unknown},
        )
    cleaned: dict[str, str] = {}
    for key, value in raw.items():
        if value is None or str(value).strip() == "":
            continue
        value = str(value).strip()
        allowed = job_types.names() if key == "job_type" else _CHOICES.get(key)
        if allowed is not None and value not in allowed:
            raise DomainError(
                ErrorCode.VALIDATION_ERROR, f"{key}: not one of {', '.join(allowed)}: {value!r}",
                fields={key: [f"One of {', '.join(allowed)}."]},
            )  # fmt: skip
        cleaned[key] = _moment(value, key) if key in ("since", "until") else value[:200]
    return cleaned


def operation_jobs(*, kind: str, job_filter: dict[str, str]) -> QuerySet[AiRuntimeJob]:
    """The jobs an operation of ``kind`` acts on: the filter's, failed ones for a rerun,
    pending, locked or running ones for a cancel."""
    jobs = selectors.jobs_matching(job_filter)
    return (
        jobs.filter(status=JobStatus.FAILED) if kind == BulkOperationKind.RERUN else jobs.filter(status__in=CANCELLABLE)
    )


def bulk_operation_start(
    *, kind: str, job_filter: Mapping[str, str | None], by: AbstractBaseUser | None
) -> BulkOperation:
    """Record an operation; it does nothing yet (``bulk_operation_run`` does it, from a
    Celery task queued after this commits, or from the command). Started by a person (an
    admin user, or the command's ``--operator``), it is in Django's admin log under their
    name, beside every other admin change, in the same transaction."""
    if kind not in BulkOperationKind.values:
        raise DomainError(ErrorCode.VALIDATION_ERROR, f"Not a bulk operation: {kind}")
    with transaction.atomic():
        operation = BulkOperation.objects.create(kind=kind, filter=job_filter_clean(job_filter), created_by=by)
        if by is not None:
            LogEntry.objects.log_actions(
                user_id=by.pk,
                queryset=[operation],
                action_flag=ADDITION,
                change_message=(
                    f"Bulk operation {operation.id}: {operation.get_kind_display()} "
                    f"matching {operation.filter or 'every job'}"
                ),
                single_object=True,
            )
    return operation


@dataclass(frozen=True)
class BatchCounts:
    done: int
    refused: int
    skipped: int


def _rerun_batch(job_ids: list[str]) -> BatchCounts:
    reruns = jobs_rerun(job_ids=job_ids)
    return BatchCounts(done=len(reruns.created), refused=len(reruns.refused), skipped=len(reruns.skipped))


def _cancel_batch(job_ids: list[str], reason: str) -> BatchCounts:
    # A running job already asked to stop is skipped: its runtime has been told.
    asked = set(
        AiRuntimeJob.objects.filter(id__in=job_ids, status__in=ACTIVE_STATUSES, cancel_requested=True).values_list(
            "id", flat=True
        )
    )
    cancelled, requested = jobs_cancel(job_ids=[job_id for job_id in job_ids if job_id not in asked], reason=reason)
    return BatchCounts(done=cancelled + requested, refused=0, skipped=len(job_ids) - cancelled - requested)


class _Superseded(Exception):
    """The run no longer holds its operation: another took it over."""


def _stalled_before() -> dt.datetime:
    return timezone.now() - dt.timedelta(seconds=settings.BULK_OPERATION_STALL_SECONDS)


def bulk_operation_run(*, operation_id: str, batch_size: int = BATCH_SIZE) -> BulkOperation | None:
    """Work through an operation's jobs in batches of ``batch_size``, in id order, each
    batch in its own transaction, its counts added to the record as it commits. Taken
    once: a second run of the same operation (a message delivered twice) does nothing
    while the first makes progress. A run that stopped part-way (its worker lost), which
    has committed nothing for ``BULK_OPERATION_STALL_SECONDS``, is taken over by the next
    run (beat queues one, ``bulk_operations_stalled``) from its cursor; each batch
    commits only while its run still holds the operation, so no batch is counted twice.
    A job the filter matched whose rerun exists already is ``skipped``, so an operation
    started again over the same jobs reruns nothing more. Once finished,
    ``done + refused + skipped == matched``: a job that came to match while it ran is
    counted in ``matched`` too, one that went (retention) in ``skipped``."""
    now, runner = timezone.now(), new_id("run")
    taken = (
        BulkOperation.objects.filter(id=operation_id, finished_at__isnull=True)
        .filter(Q(started_at__isnull=True) | Q(progressed_at__lt=_stalled_before()))
        .update(started_at=Coalesce("started_at", Value(now)), progressed_at=now, runner=runner)
    )
    if not taken:
        return None
    operation = BulkOperation.objects.get(id=operation_id)
    jobs = operation_jobs(kind=operation.kind, job_filter=operation.filter)
    if not operation.cursor:  # no batch committed yet: what it matches is counted now
        BulkOperation.objects.filter(id=operation_id, runner=runner).update(matched=jobs.count())
    else:
        logger.warning(
            "bulk operation %s: taken over from job %s, where its run stopped", operation_id, operation.cursor
        )
    reason = f"Cancelled by an operator (bulk operation {operation_id})"
    cursor = operation.cursor
    try:
        while True:
            batch = list(jobs.filter(id__gt=cursor).order_by("id").values_list("id", flat=True)[:batch_size])
            if not batch:
                break
            with transaction.atomic():
                counts = (
                    _rerun_batch(batch) if operation.kind == BulkOperationKind.RERUN else _cancel_batch(batch, reason)
                )
                if not BulkOperation.objects.filter(id=operation_id, runner=runner).update(
                    done=F("done") + counts.done,
                    refused=F("refused") + counts.refused,
                    skipped=F("skipped") + counts.skipped,
                    cursor=batch[-1],
                    progressed_at=timezone.now(),
                ):
                    raise _Superseded  # the batch rolls back: the run that holds it does it
            cursor = batch[-1]
    except _Superseded:
        logger.warning("bulk operation %s: another run took it over; this one stops", operation_id)
        return None
    # Every job seen was counted once (done, refused or skipped): one that matched at the
    # start and was gone by its batch is skipped.
    seen = F("done") + F("refused") + F("skipped")
    BulkOperation.objects.filter(id=operation_id, runner=runner).update(
        matched=Greatest(F("matched"), seen),
        skipped=F("skipped") + Greatest(Value(0), F("matched") - seen),
        finished_at=timezone.now(),
    )
    operation.refresh_from_db()
    logger.info(
        "bulk operation %s (%s) finished: matched %s, done %s, refused %s, skipped %s",
        operation.id, operation.kind, operation.matched, operation.done, operation.refused, operation.skipped,
    )  # fmt: skip
    return operation


def bulk_operations_stalled() -> list[str]:
    """Unfinished operations whose run stopped (nothing committed for
    ``BULK_OPERATION_STALL_SECONDS``) or never began (its message lost): for beat to queue again."""
    stalled = _stalled_before()
    return list(
        BulkOperation.objects.filter(finished_at__isnull=True)
        .filter(Q(started_at__isnull=True, created_at__lt=stalled) | Q(progressed_at__lt=stalled))
        .order_by("created_at")
        .values_list("id", flat=True)
    )
