"""The job state machine (seed 000 §3), in one place.

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

The statements are written in SQL both PostgreSQL and SQLite run (``RETURNING``
included); claiming adds ``FOR UPDATE SKIP LOCKED`` where the database has it.
Times are computed here in Python and passed in, so every database agrees.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection

from accounts.models import Account
from ai_jobs.models.jobs import AiRuntimeJob
from config.sql import execute, fetch, from_row, id_among, placeholders
from quotas.models import PlatformCircuitBreaker, UserAiSettings

TABLE = AiRuntimeJob._meta.db_table
# Each job's user by the public id its body carries, read in the transition's own statement.
PUBLIC_ID_SQL = f"(SELECT a.public_id FROM {Account._meta.db_table} a WHERE a.user_id = {TABLE}.user_id)"
ACTIVE_SQL = "status IN ('locked', 'running')"
# Only the lock holder, for the attempt it holds, while it is live: an attempt is over the
# moment its lease lapses or its deadline passes, not when the reaper next runs.
HOLDER_SQL = (
    f"id = %s AND {ACTIVE_SQL} AND locked_by = %s AND lock_until >= %s AND (deadline_ms IS NULL OR deadline_ms >= %s)"
)


# The breaker protects the provider (contract §3): platform-key jobs are handed out
# only while it is closed (no row yet: closed). Half-open trial jobs are the
# ``trial`` claim's, under the breaker row's lock.
PLATFORM_ALLOWED_SQL = (
    f"(api_key_mode <> 'platform_key' OR NOT EXISTS (SELECT 1 FROM {PlatformCircuitBreaker._meta.db_table} b "
    "WHERE b.id = 1 AND b.state <> 'closed'))"
)


def consent_sql() -> str:
    """The job may go on: its cancel was not requested and its user's AI analysis is
    on now (no settings row: the default). Consent holds for the job's whole life."""
    default = "TRUE" if settings.AI_ANALYSIS_ENABLED_BY_DEFAULT else "FALSE"
    return (
        f"(cancel_requested = FALSE AND COALESCE((SELECT s.ai_analysis_enabled FROM {UserAiSettings._meta.db_table} s "
        f"WHERE s.user_id = {TABLE}.user_id), {default}))"
    )


_FIELDS = AiRuntimeJob._meta.concrete_fields
_ALL = tuple(field.attname for field in _FIELDS)
_FIELD_OF = {field.attname: field for field in _FIELDS}


def _in_model_order(*attnames: str) -> tuple[str, ...]:
    """Model.from_db takes a subset of the fields in the model's own order."""
    if not set(attnames) <= set(_ALL):
        raise ValueError(f"not fields of a job: {set(attnames) - set(_ALL)}")
    return tuple(name for name in _ALL if name in attnames)


# What a claimed job is rendered with (the runtime API's job body) and sorted by.
CLAIMED = _in_model_order(
    "id", "user_id", "job_type", "target_type", "target_id", "status", "priority", "api_key_mode", "credential_id",
    "model_provider", "model_name", "prompt_version", "output_schema_version", "attempt_no", "retry_count",
    "max_retry_count", "timeout_seconds", "params", "lock_until", "created_at",
)  # fmt: skip
# What a succeeded job's result is stored, published, noticed and charged with.
SUCCEEDED = _in_model_order(
    "id", "user_id", "job_type", "target_type", "target_id", "status", "priority", "api_key_mode", "credential_id",
    "model_provider", "model_name", "prompt_version", "output_schema_version", "attempt_no", "params", "quota_date",
    "created_at",
)  # fmt: skip


def _jobs(
    sql: str, params: Sequence[Any], *, fields: tuple[str, ...] = _ALL, public_id: bool = True
) -> list[AiRuntimeJob]:
    """Run an ``UPDATE ... RETURNING *`` and load the rows it changed as jobs (only
    ``fields``: the others are deferred, so a caller that reads one costs a query, which
    the statement-count tests would show), with their user's public id, without the
    ORM's per-query column introspection (this is the hot path)."""
    returning = ", ".join(_FIELD_OF[name].column for name in fields) + (f", {PUBLIC_ID_SQL}" if public_id else "")
    rows = fetch(sql.replace("RETURNING *", f"RETURNING {returning}"), params)
    jobs = []
    for row in rows:
        job = from_row(AiRuntimeJob, row, attnames=fields)
        if public_id and row[-1] is not None:
            job.user_public_id = row[-1]
        jobs.append(job)
    return jobs


def _ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


# A locked attempt has no deadline yet: ``timeout_seconds`` counts from its start.
_LOCK_SET = (
    "status = 'locked', locked_by = %s, locked_at = %s, lock_until = %s, deadline_ms = NULL, "
    "attempt_no = attempt_no + 1, updated_at = %s"
)
# A lock that is at once the attempt's start (the claim fast path): running, its deadline set.
_START_SET = (
    _LOCK_SET.replace("status = 'locked'", "status = 'running'").replace(" deadline_ms = NULL,", "")
    + ", started_at = %s, deadline_ms = %s + timeout_seconds * 1000"
)


def lock(
    *, job_id: str, instance_id: str, now: dt.datetime, lease: dt.timedelta, trial: bool = False
) -> AiRuntimeJob | None:
    """pending → locked, for one named job (seed 000 §5.1, §5.2); a platform-key job
    only while the breaker is closed, or as a half-open ``trial`` (the caller holds
    the breaker row and counted the trial jobs)."""
    breaker = "" if trial else f" AND {PLATFORM_ALLOWED_SQL}"
    sql = (
        f"UPDATE {TABLE} SET {_LOCK_SET} WHERE id = %s AND status = 'pending' AND available_at <= %s "
        f"AND (lock_until IS NULL OR lock_until < %s){breaker} RETURNING *"
    )
    rows = _jobs(sql, [instance_id, now, now + lease, now, job_id, now, now])
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
) -> list[AiRuntimeJob]:
    """pending → locked for the first ``limit`` due jobs of the given types, in
    ``(priority, created_at, id)`` order. ``SKIP LOCKED`` lets any number of runtimes
    claim at once: each skips the rows another is taking instead of waiting for them.
    Platform-key jobs only while the breaker is closed; ``trial``: only platform-key
    jobs, for a caller holding the half-open breaker's row. ``start``: straight to
    ``running`` (the claim fast path, whose caller is handed everything at once)."""
    if not job_types or limit <= 0:
        return []
    breaker = "api_key_mode = 'platform_key'" if trial else PLATFORM_ALLOWED_SQL
    skip_locked = " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    # A materialized CTE: the inner LIMIT is applied once. ``id IN (SELECT ... LIMIT)``
    # may be re-planned as a join that locks and updates more rows than asked for.
    sql = (
        f"WITH picked AS MATERIALIZED (SELECT id FROM {TABLE} WHERE status = 'pending' AND available_at <= %s "
        f"AND job_type IN ({placeholders(job_types)}) AND {breaker} "
        f"ORDER BY priority, created_at, id LIMIT %s{skip_locked}) "
        f"UPDATE {TABLE} SET {_START_SET if start else _LOCK_SET} WHERE status = 'pending' "
        f"AND {id_among('picked')} RETURNING *"
    )
    jobs = _jobs(
        sql,
        [now, *job_types, limit, instance_id, now, now + lease, now, *([now, _ms(now)] if start else [])],
        fields=CLAIMED,
    )
    jobs.sort(key=lambda job: (job.priority, job.created_at, job.id))
    return jobs


# The attempt's deadline, set where it starts (locked → running).
_DEADLINE_SET = "deadline_ms = CASE WHEN status = 'locked' THEN %s + timeout_seconds * 1000 ELSE deadline_ms END"


def start(*, job_id: str, instance_id: str, attempt_no: int, now: dt.datetime) -> None:
    """locked → running at the attempt's first snapshot or credential call, which show
    its runtime at work as a heartbeat would; no change when it is not (or no longer) so."""
    execute(
        f"UPDATE {TABLE} SET status = 'running', started_at = %s, {_DEADLINE_SET}, updated_at = %s "
        f"WHERE {HOLDER_SQL} AND status = 'locked' AND attempt_no = %s",
        [now, _ms(now), now, job_id, instance_id, now, _ms(now), attempt_no],
    )


@dataclass(frozen=True)
class Heartbeat:
    lock_until: dt.datetime
    cancel_requested: bool


def heartbeat(*, job_id: str, instance_id: str, now: dt.datetime, lease: dt.timedelta) -> Heartbeat | None:
    """Extend the lease; the first heartbeat moves locked → running (seed 000 §5.3)."""
    lock_until = now + lease
    rows = fetch(
        f"UPDATE {TABLE} SET lock_until = %s, status = 'running', "
        f"started_at = CASE WHEN status = 'locked' THEN %s ELSE started_at END, {_DEADLINE_SET}, updated_at = %s "
        f"WHERE {HOLDER_SQL} RETURNING cancel_requested",
        [lock_until, now, _ms(now), now, job_id, instance_id, now, _ms(now)],
    )
    return Heartbeat(lock_until=lock_until, cancel_requested=bool(rows[0][0])) if rows else None


def succeed(*, job_id: str, instance_id: str, attempt_no: int, now: dt.datetime) -> AiRuntimeJob | None:
    """locked/running → succeeded, by the holder of this very attempt, while the
    user's consent holds (else ``cancel_withdrawn`` ends it). A result straight from
    locked is the first call showing the runtime at work: the attempt starts there."""
    rows = _jobs(
        f"UPDATE {TABLE} SET status = 'succeeded', finished_at = %s, lock_until = NULL, "
        "started_at = CASE WHEN status = 'locked' THEN %s ELSE started_at END, "
        "error_code = NULL, error_message = NULL, updated_at = %s "
        f"WHERE {HOLDER_SQL} AND attempt_no = %s AND {consent_sql()} RETURNING *",
        [now, now, now, job_id, instance_id, now, _ms(now), attempt_no],
        fields=SUCCEEDED,  # and the public id: a recommendation naming the user carries it
    )
    return rows[0] if rows else None


def cancel_withdrawn(*, job_id: str, instance_id: str, now: dt.datetime, attempt_no: int | None = None) -> str | None:
    """locked/running → cancelled, for the holder (of this attempt, when given), once
    the job's cancel was requested or its user turned AI analysis off. Returns the
    job's type, or None when the job is not the caller's or consent still holds."""
    attempt = " AND attempt_no = %s" if attempt_no is not None else ""
    rows = fetch(
        f"UPDATE {TABLE} SET status = 'cancelled', cancel_requested = TRUE, finished_at = %s, lock_until = NULL, "
        "deadline_ms = NULL, error_code = 'JOB_CANCELLED', error_message = %s, updated_at = %s "
        f"WHERE {HOLDER_SQL}{attempt} AND NOT {consent_sql()} RETURNING job_type",
        [
            now,
            "Cancelled: the user withdrew consent (cancel, or AI analysis turned off) while a runtime held the job",
            now,
            job_id,
            instance_id,
            now,
            _ms(now),
            *([attempt_no] if attempt_no is not None else []),
        ],
    )
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
    ``retry_at``), → cancelled (``JOB_CANCELLED``, or any failure of a job whose
    cancellation was requested) or → failed."""
    if cancelled:
        target = "'cancelled'"
        retry = "FALSE"
    else:
        # A job whose cancellation was requested is not tried again: it ends cancelled.
        retry = f"({'TRUE' if retryable else 'FALSE'} AND cancel_requested = FALSE AND retry_count < max_retry_count)"
        target = f"CASE WHEN cancel_requested THEN 'cancelled' WHEN {retry} THEN 'pending' ELSE 'failed' END"
    rows = fetch(
        f"UPDATE {TABLE} SET status = {target}, "
        f"retry_count = CASE WHEN {retry} THEN retry_count + 1 ELSE retry_count END, "
        f"available_at = CASE WHEN {retry} THEN %s ELSE available_at END, "
        f"finished_at = CASE WHEN {retry} THEN NULL ELSE %s END, "
        f"locked_by = CASE WHEN {retry} THEN NULL ELSE locked_by END, "
        "lock_until = NULL, deadline_ms = NULL, error_code = %s, error_message = %s, updated_at = %s "
        f"WHERE {HOLDER_SQL} AND attempt_no = %s "
        "RETURNING status, retry_count, api_key_mode, job_type, user_id, target_type, target_id",
        [retry_at, now, error_code, error_message, now, job_id, instance_id, now, _ms(now), attempt_no],
    )
    return Failed(*rows[0]) if rows else None


def cancel_pending(*, job_ids: Sequence[str], now: dt.datetime, reason: str) -> list[str]:
    """pending → cancelled. Cancelled jobs are never handed to a runtime again.
    Returns the job types of the jobs it cancelled, one per job."""
    if not job_ids:
        return []
    rows = fetch(
        f"UPDATE {TABLE} SET status = 'cancelled', finished_at = %s, error_code = 'JOB_CANCELLED', "
        f"error_message = %s, updated_at = %s WHERE status = 'pending' AND id IN ({placeholders(job_ids)}) "
        "RETURNING job_type",
        [now, reason, now, *job_ids],
    )
    return [row[0] for row in rows]


def request_cancel(*, job_ids: Sequence[str], now: dt.datetime) -> int:
    """Flag locked/running jobs; their runtime sees ``cancelRequested`` on its next heartbeat."""
    if not job_ids:
        return 0
    rows = fetch(
        f"UPDATE {TABLE} SET cancel_requested = TRUE, updated_at = %s "
        f"WHERE {ACTIVE_SQL} AND id IN ({placeholders(job_ids)}) RETURNING id",
        [now, *job_ids],
    )
    return len(rows)


def expire(*, job_ids: Sequence[str], now: dt.datetime) -> list[str]:
    """locked/running → expired, for the given jobs whose lease lapsed or whose
    attempt ran past ``timeout_seconds``; the condition is checked again here, so a
    job that heartbeat in the meantime stays where it is."""
    if not job_ids:
        return []
    rows = fetch(
        f"UPDATE {TABLE} SET status = 'expired', lock_until = NULL, updated_at = %s "
        f"WHERE {ACTIVE_SQL} AND (lock_until < %s OR deadline_ms < %s) "
        f"AND id IN ({placeholders(job_ids)}) RETURNING id",
        [now, now, _ms(now), *job_ids],
    )
    return [row[0] for row in rows]


class Settled(NamedTuple):
    id: str
    status: str
    job_type: str
    user_id: int
    target_type: str
    target_id: str
    error_code: str


def settle_expired(*, job_ids: Sequence[str], now: dt.datetime) -> list[Settled]:
    """expired → pending with ``retry_count + 1`` while retries remain, else failed
    with ``JOB_TIMEOUT``; a job whose cancellation was requested ends cancelled.
    Returns each one's id, new status and type, and what its notice names."""
    if not job_ids:
        return []
    retry = "(cancel_requested = FALSE AND retry_count < max_retry_count)"
    rows = fetch(
        f"UPDATE {TABLE} SET "
        f"status = CASE WHEN cancel_requested THEN 'cancelled' WHEN {retry} THEN 'pending' ELSE 'failed' END, "
        f"retry_count = CASE WHEN {retry} THEN retry_count + 1 ELSE retry_count END, "
        f"available_at = CASE WHEN {retry} THEN %s ELSE available_at END, "
        f"finished_at = CASE WHEN {retry} THEN NULL ELSE %s END, "
        f"locked_by = CASE WHEN {retry} THEN NULL ELSE locked_by END, "
        f"error_code = CASE WHEN cancel_requested THEN 'JOB_CANCELLED' ELSE 'JOB_TIMEOUT' END, "
        "error_message = CASE WHEN cancel_requested THEN 'Cancelled; the lease lapsed before the runtime confirmed' "
        "ELSE 'The lease lapsed or the attempt ran past timeoutSeconds' END, "
        "deadline_ms = NULL, updated_at = %s "
        f"WHERE status = 'expired' AND id IN ({placeholders(job_ids)}) "
        "RETURNING id, status, job_type, user_id, target_type, target_id, error_code",
        [now, now, now, *job_ids],
    )
    return [Settled(*row) for row in rows]


def lapsed_ids(*, after_id: str, now: dt.datetime, limit: int) -> list[str]:
    """Ids of leased jobs whose lease lapsed or whose attempt timed out, and of jobs
    left ``expired``, after the cursor ``after_id``, locked for this transaction."""
    skip_locked = " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    rows = fetch(
        f"SELECT id FROM {TABLE} WHERE status IN ('locked', 'running', 'expired') AND id > %s "
        "AND (status = 'expired' OR lock_until < %s OR deadline_ms < %s) "
        f"ORDER BY id LIMIT %s{skip_locked}",
        [after_id, now, _ms(now), limit],
    )
    return [row[0] for row in rows]


def record_rerun(*, job_id: str, rerun_id: str, now: dt.datetime) -> bool:
    """Name ``rerun_id`` as the rerun of the failed ``job_id``, once: a job already
    rerun matches no row, so of two operators rerunning it at once only one wins.
    The job changed, so ``updated_at`` moves too (a queryset update skips ``auto_now``)."""
    updated = AiRuntimeJob.objects.filter(id=job_id, status="failed", rerun_as__isnull=True).update(
        rerun_as_id=rerun_id, updated_at=now
    )
    return updated == 1
