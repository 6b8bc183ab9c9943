"""The job state machine, in one place.

Every transition is ONE conditional ``UPDATE ... WHERE id = ... AND status IN (...)``
whose row count decides: a runtime that lost its lease, a second runtime racing
for the same job, or a stale retry all match zero rows and change nothing. No
status is ever read, changed in Python and saved.

    pending ──lock/claim──▶ locked ──heartbeat──▶ running   (or the first snapshot/credential)
       ▲                      │                      │
       │                      ├──── result ─────────▶ succeeded
       │                      ├──── fail ───────────▶ failed | cancelled
       ├──── fail (retryable) ┤                      │
       └──── reaper ◀─ expired ◀── lease lapsed or timeoutSeconds passed
    pending ──cancel──▶ cancelled

The statements are ``ai_jobs.queries``'; all but the claim run on PostgreSQL and
SQLite alike (``RETURNING`` included). Times are computed here in Python and passed
in, so every database agrees.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection
from django.db.models import Case, Value, When

from ai_jobs import queries
from ai_jobs.models.jobs import ACTIVE_STATUSES, AiRuntimeJob
from config.sql import execute, fetch, from_row
from quotas.models import PlatformCircuitBreaker

_ALL = tuple(field.attname for field in AiRuntimeJob._meta.concrete_fields)


def _in_model_order(*attnames: str) -> tuple[str, ...]:
    """Model.from_db takes a subset of the fields in the model's own order."""
    if not set(attnames) <= set(_ALL):
        raise ValueError(f"not fields of a job: {set(attnames) - set(_ALL)}")
    return tuple(name for name in _ALL if name in attnames)


# What queries.CLAIM returns: what a claimed job is rendered with and sorted by.
CLAIMED = _in_model_order(
    "id", "user_id", "job_type", "target_type", "target_id", "status", "priority", "api_key_mode", "credential_id",
    "model_provider", "model_name", "prompt_version", "output_schema_version", "attempt_no", "retry_count",
    "max_retry_count", "timeout_seconds", "params", "lock_until", "created_at",
)  # fmt: skip
# What queries.SUCCEED returns: what a succeeded job's result is stored, published, noticed and charged with.
SUCCEEDED = _in_model_order(
    "id", "user_id", "job_type", "target_type", "target_id", "status", "priority", "api_key_mode", "credential_id",
    "model_provider", "model_name", "prompt_version", "output_schema_version", "attempt_no", "params", "quota_date",
    "created_at",
)  # fmt: skip


def consents_by_default() -> bool:
    """Whether a user without a settings row has AI analysis on: the statements' ``enabled_by_default``."""
    return bool(settings.AI_ANALYSIS_ENABLED_BY_DEFAULT)


def _jobs(rows: Sequence[Sequence[Any]], fields: tuple[str, ...] = _ALL) -> list[AiRuntimeJob]:
    """The rows a statement returned (``fields``, then the user's public id) as jobs; the
    fields not returned are deferred, so a caller that reads one costs a query, which the
    statement-count tests would show. No ORM query is compiled: this is the hot path."""
    jobs = []
    for row in rows:
        job = from_row(AiRuntimeJob, row, attnames=fields)
        if row[-1] is not None:
            job.user_public_id = row[-1]
        jobs.append(job)
    return jobs


def _ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def _lease_params(
    *, instance_id: str, now: dt.datetime, lease: dt.timedelta, trial: bool, start: bool, claim_id: str | None = None
) -> dict:
    return {
        "claim_id": claim_id,
        "status": "running" if start else "locked",
        "instance_id": instance_id,
        "now": now,
        "lock_until": now + lease,
        "started_at": now if start else None,
        "started_ms": _ms(now) if start else None,
        "trial": trial,
    }


def lock(
    *,
    job_id: str,
    instance_id: str,
    now: dt.datetime,
    lease: dt.timedelta,
    trial: bool = False,
    start: bool = False,
    claim_id: str | None = None,
) -> AiRuntimeJob | None:
    """pending → locked, for one named job; a platform-key job only while the breaker
    is closed, or as a half-open ``trial`` (the caller holds the breaker row and counted
    the trial jobs). ``start``: straight to running. ``claim_id``: the claim's, when a
    claim locks it."""
    params = _lease_params(instance_id=instance_id, now=now, lease=lease, trial=trial, start=start, claim_id=claim_id)
    rows = _jobs(fetch(queries.LOCK, {**params, "job_id": job_id}))
    return rows[0] if rows else None


def claim(
    *,
    job_types: Sequence[str],
    limit: int,
    instance_id: str,
    now: dt.datetime,
    lease: dt.timedelta,
    trial: bool = False,
    start: bool = False,
    claim_id: str | None = None,
) -> list[AiRuntimeJob]:
    """pending → locked for the first ``limit`` due jobs of the given types, in
    ``(priority, created_at, id)`` order, any number of runtimes claiming at once.
    Platform-key jobs only while the breaker is closed; ``trial``: only platform-key
    jobs, for a caller holding the half-open breaker's row. ``start``: straight to
    ``running`` (the claim fast path, whose caller is handed everything at once).
    ``claim_id``: the claim's ``claimId``, kept on each job until it is touched."""
    if not job_types or limit <= 0:
        return []
    params = _lease_params(instance_id=instance_id, now=now, lease=lease, trial=trial, start=start, claim_id=claim_id)
    if connection.vendor == "postgresql":
        jobs = _jobs(fetch(queries.CLAIM, {**params, "job_types": list(job_types), "limit": limit}), CLAIMED)
    else:  # SQLite's writers take turns: the pick, then each job's own lock
        picked = _picked(job_types, limit, now, trial)
        locked = (
            lock(
                job_id=job_id,
                instance_id=instance_id,
                now=now,
                lease=lease,
                trial=trial,
                start=start,
                claim_id=claim_id,
            )
            for job_id in picked
        )
        jobs = [job for job in locked if job is not None]
    jobs.sort(key=lambda job: (job.priority, job.created_at, job.id))
    return jobs


def _picked(job_types: Sequence[str], limit: int, now: dt.datetime, trial: bool) -> list[str]:
    """The ids queries.CLAIM would pick, asked of the ORM (SQLite has no arrays)."""
    due = AiRuntimeJob.objects.filter(status="pending", available_at__lte=now, job_type__in=list(job_types))
    if trial:
        due = due.filter(api_key_mode="platform_key")
    else:
        tripped = PlatformCircuitBreaker.objects.filter(id=1).exclude(state="closed").exists()
        due = due.exclude(api_key_mode="platform_key") if tripped else due
    return list(due.order_by("priority", "created_at", "id").values_list("id", flat=True)[:limit])


def claimed_again(*, claim_id: str, instance_id: str, now: dt.datetime) -> list[AiRuntimeJob]:
    """The jobs the claim ``claim_id`` of ``instance_id`` took, still held by it and
    untouched since, with their current leases; nothing changes."""
    params = {"claim_id": claim_id, "instance_id": instance_id, "now": now, "now_ms": _ms(now)}
    jobs = _jobs(fetch(queries.CLAIMED_AGAIN, params), CLAIMED)
    jobs.sort(key=lambda job: (job.priority, job.created_at, job.id))
    return jobs


def unclaim(*, job_id: str) -> None:
    """The job was touched (a snapshot or credential call): its claim, sent again, no longer answers it."""
    execute(queries.UNCLAIM, {"job_id": job_id})


@dataclass(frozen=True)
class Heartbeat:
    lock_until: dt.datetime
    cancel_requested: bool


def heartbeat(*, job_id: str, instance_id: str, now: dt.datetime, lease: dt.timedelta) -> Heartbeat | None:
    """Extend the lease; the attempt's first heartbeat moves locked → running, its start."""
    lock_until = now + lease
    params = {"job_id": job_id, "instance_id": instance_id, "now": now, "now_ms": _ms(now), "lock_until": lock_until}
    rows = fetch(queries.HEARTBEAT, params)
    return Heartbeat(lock_until=lock_until, cancel_requested=bool(rows[0][0])) if rows else None


def start(*, job_id: str, instance_id: str, attempt_no: int, now: dt.datetime) -> None:
    """locked → running at the attempt's first snapshot or credential call, which show
    its runtime at work as a heartbeat would; no change when it is not (or no longer) so."""
    params = {"job_id": job_id, "instance_id": instance_id, "attempt_no": attempt_no, "now": now, "now_ms": _ms(now)}
    fetch(queries.START, params)


def succeed(*, job_id: str, instance_id: str, attempt_no: int, now: dt.datetime) -> AiRuntimeJob | None:
    """locked/running → succeeded, by the holder of this very attempt, while the
    user's consent holds (else ``cancel_withdrawn`` ends it). A result straight from
    locked is the first call showing the runtime at work: the attempt starts there.
    The job comes back with ``user_has_devices``: whether the user has a device to push to."""
    params = {
        "job_id": job_id,
        "instance_id": instance_id,
        "attempt_no": attempt_no,
        "now": now,
        "now_ms": _ms(now),
        "enabled_by_default": consents_by_default(),
    }
    rows = fetch(queries.SUCCEED, params)
    if not rows:
        return None
    job = _jobs(rows, SUCCEEDED)[0]  # with the public id: a recommendation may name the user
    job.user_has_devices = bool(rows[0][-2])  # whether its notice is pushed anywhere
    return job


def cancel_withdrawn(*, job_id: str, instance_id: str, now: dt.datetime, attempt_no: int | None = None) -> str | None:
    """locked/running → cancelled, for the holder (of this attempt, when given), once
    the job's cancel was requested or its user turned AI analysis off. Returns the
    job's type, or None when the job is not the caller's or consent still holds."""
    params = {
        "job_id": job_id,
        "instance_id": instance_id,
        "attempt_no": attempt_no,
        "now": now,
        "now_ms": _ms(now),
        "enabled_by_default": consents_by_default(),
    }
    rows = fetch(queries.CANCEL_WITHDRAWN, params)
    return rows[0][0] if rows else None


@dataclass(frozen=True)
class Failed:
    status: str
    retry_count: int
    api_key_mode: str
    job_type: str
    # What the failure notice names (``ai_jobs.notifications.FinishedJob``).
    user_id: int
    target_type: str
    target_id: str


def fail(
    *,
    job_id: str,
    instance_id: str,
    attempt_no: int,
    error_code: str,
    error_message: str,
    retryable: bool,
    cancelled: bool,
    retry_at: dt.datetime,
    now: dt.datetime,
) -> Failed | None:
    """locked/running → pending (retryable, retries left; available again at
    ``retry_at``), → cancelled (``cancelled``, or any failure of a job whose
    cancellation was requested) or → failed."""
    params = {
        "job_id": job_id,
        "instance_id": instance_id,
        "attempt_no": attempt_no,
        "error_code": error_code,
        "error_message": error_message,
        "retryable": retryable and not cancelled,
        "cancelled": cancelled,
        "retry_at": retry_at,
        "now": now,
        "now_ms": _ms(now),
    }
    rows = fetch(queries.FAIL, params)
    return Failed(*rows[0]) if rows else None


def cancel_pending(*, job_ids: Sequence[str], now: dt.datetime, reason: str) -> list[str]:
    """pending → cancelled. Cancelled jobs are never handed to a runtime again.
    Returns the job types of the jobs it cancelled, one per job. Not the hot path: the
    ORM, the rows locked (on PostgreSQL) before they are read."""
    pending = AiRuntimeJob.objects.filter(status="pending", id__in=list(job_ids))
    found = list(pending.select_for_update().values_list("id", "job_type"))
    if found:
        AiRuntimeJob.objects.filter(id__in=[job_id for job_id, _ in found]).update(
            status="cancelled", finished_at=now, error_code="JOB_CANCELLED", error_message=reason, updated_at=now
        )
    return [job_type for _, job_type in found]


def request_cancel(*, job_ids: Sequence[str], now: dt.datetime) -> int:
    """Flag locked/running jobs; their runtime sees ``cancelRequested`` on its next heartbeat."""
    if not job_ids:
        return 0
    active = AiRuntimeJob.objects.filter(status__in=ACTIVE_STATUSES, id__in=list(job_ids))
    return active.update(cancel_requested=True, updated_at=now)


def lapsed_ids(*, after_id: str, now: dt.datetime, limit: int) -> list[str]:
    """Ids of leased jobs whose lease lapsed or whose attempt timed out, and of jobs
    left ``expired``, after the cursor ``after_id``, in id order."""
    rows = fetch(queries.LAPSED_IDS, {"after_id": after_id, "now": now, "now_ms": _ms(now), "limit": limit})
    return [row[0] for row in rows]


def expire(*, after_id: str, last_id: str, now: dt.datetime) -> list[str]:
    """locked/running → expired, for the jobs of the batch ``(after_id, last_id]``
    whose lease lapsed or whose attempt ran past ``timeout_seconds``; the condition is
    checked again here, so a job that heartbeat in the meantime stays where it is."""
    rows = fetch(queries.EXPIRE, {"after_id": after_id, "last_id": last_id, "now": now, "now_ms": _ms(now)})
    return [row[0] for row in rows]


class Settled(NamedTuple):
    id: str
    status: str
    job_type: str
    user_id: int
    target_type: str
    target_id: str
    error_code: str


def settle_expired(*, after_id: str, last_id: str, now: dt.datetime) -> list[Settled]:
    """expired → pending with ``retry_count + 1`` while retries remain, else failed
    with ``JOB_TIMEOUT``; a job whose cancellation was requested ends cancelled.
    Returns each one's id, new status and type, and what its notice names."""
    rows = fetch(queries.SETTLE_EXPIRED, {"after_id": after_id, "last_id": last_id, "now": now})
    return [Settled(*row) for row in rows]


def record_reruns(*, jobs: Sequence[AiRuntimeJob], rerun_ids: Sequence[str], now: dt.datetime) -> int:
    """Name each of ``rerun_ids`` as the rerun of its failed job, once, in one statement:
    a job already rerun (another operator was first) is left as it is. How many were
    named."""
    if connection.vendor == "postgresql":
        params = {"job_ids": [job.id for job in jobs], "rerun_ids": list(rerun_ids), "now": now}
        named = len(fetch(queries.RECORD_RERUNS, params))
    else:  # SQLite (no arrays): the same conditional update, each job's rerun named by a CASE
        named_as = Case(*(When(id=job.id, then=Value(rerun_id)) for job, rerun_id in zip(jobs, rerun_ids, strict=True)))
        named = AiRuntimeJob.objects.filter(
            id__in=[job.id for job in jobs], status="failed", rerun_as__isnull=True
        ).update(rerun_as_id=named_as, updated_at=now)
    for job, rerun_id in zip(jobs, rerun_ids, strict=True):
        job.rerun_as_id, job.updated_at = rerun_id, now
    return named
