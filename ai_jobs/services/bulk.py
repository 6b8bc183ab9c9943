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

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F, QuerySet
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

logger = logging.getLogger(__name__)

BATCH_SIZE = 500
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
    Celery task queued after this commits, or from the command)."""
    if kind not in BulkOperationKind.values:
        raise DomainError(ErrorCode.VALIDATION_ERROR, f"Not a bulk operation: {kind}")
    return BulkOperation.objects.create(kind=kind, filter=job_filter_clean(job_filter), created_by=by)


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


def bulk_operation_run(*, operation_id: str, batch_size: int = BATCH_SIZE) -> BulkOperation | None:
    """Work through an operation's jobs in batches of ``batch_size``, in id order, each
    batch in its own transaction, its counts added to the record as it commits. Taken
    once: a second run of the same operation (a message delivered twice) does nothing.
    A job the filter matched whose rerun exists already is ``skipped``, so an operation
    started again over the same jobs reruns nothing more. Once finished,
    ``done + refused + skipped == matched``: a job that came to match while it ran is
    counted in ``matched`` too, one that went (retention) in ``skipped``."""
    now = timezone.now()
    if not BulkOperation.objects.filter(id=operation_id, started_at__isnull=True).update(started_at=now):
        return None
    operation = BulkOperation.objects.get(id=operation_id)
    jobs = operation_jobs(kind=operation.kind, job_filter=operation.filter)
    matched = jobs.count()
    BulkOperation.objects.filter(id=operation_id).update(matched=matched)
    reason = f"Cancelled by an operator (bulk operation {operation_id})"
    cursor, seen = "", 0
    while True:
        batch = list(jobs.filter(id__gt=cursor).order_by("id").values_list("id", flat=True)[:batch_size])
        if not batch:
            break
        with transaction.atomic():
            counts = _rerun_batch(batch) if operation.kind == BulkOperationKind.RERUN else _cancel_batch(batch, reason)
            BulkOperation.objects.filter(id=operation_id).update(
                done=F("done") + counts.done,
                refused=F("refused") + counts.refused,
                skipped=F("skipped") + counts.skipped,
                cursor=batch[-1],
            )
        cursor, seen = batch[-1], seen + len(batch)
    BulkOperation.objects.filter(id=operation_id).update(
        matched=max(matched, seen), skipped=F("skipped") + max(0, matched - seen), finished_at=timezone.now()
    )
    operation.refresh_from_db()
    logger.info(
        "bulk operation %s (%s) finished: matched %s, done %s, refused %s, skipped %s",
        operation.id, operation.kind, operation.matched, operation.done, operation.refused, operation.skipped,
    )  # fmt: skip
    return operation
