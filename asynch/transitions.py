"""The task state machine of model-asynch, in one place.

    0 queued ──claim──▶ 1 running ──succeed──▶ 2 succeeded ──getTaskBatch──▶ 4 downloaded ──expireAt──▶ deleted
        ▲                   │
        │                   └──fail / lease lapsed / stuck──▶ 3 failed ──retries exhausted, retention──▶ deleted
        └────────── cleaner retry (retryCount + 1, tail or head) ◀──┘
    0 queued ──stuck past ASYNCH_TASK_TIMEOUT_SECONDS──▶ 3 failed

Every transition is one conditional ``UPDATE`` whose row count decides: a worker
whose lease lapsed, or whose task was failed as stuck, finishes nothing because
it no longer matches ``state = 1 AND attempt_no = <its attempt>``. The SQL runs on
PostgreSQL and SQLite alike (``RETURNING`` included); times are passed in.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from asynch.models import AsynchModel, AsynchModelStat, AsynchTask, AsynchTaskAnswer
from config.days import platform_day
from config.sql import adapt, execute, fetch, id_among, placeholders

TABLE = AsynchTask._meta.db_table
ANSWERS = AsynchTaskAnswer._meta.db_table
# Whether a claimed task already has its model's answer (an upload to retry, no call to make).
# The task's columns by name, not ``*``: a prepared statement whose result columns changed
# (a migration added one) fails until its connection is replaced.
_TASK_COLUMNS = ", ".join(field.column for field in AsynchTask._meta.concrete_fields)
_HAS_ANSWER = f"EXISTS (SELECT 1 FROM {ANSWERS} a WHERE a.task_id = {TABLE}.id) AS has_answer"


def _skip_locked() -> str:
    return " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""


# --- creating ----------------------------------------------------------------------------


def enqueue(
    *,
    task_id: str,
    tenant_id: str,
    model_name: str,
    request_payload: dict[str, Any],
    biz_name: str,
    creator: str,
    forward_headers_encrypted: str | None,
    now: dt.datetime,
) -> bool:
    """→ 0: insert the task, in ONE statement, only if its model exists, is enabled
    and has fewer than ``queue_limit`` queued tasks (0: no limit). The count and the
    insert are not serialised, so the limit is approximate, as the seed says."""
    payload = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    models_table = AsynchModel._meta.db_table
    return (
        execute(
            f"INSERT INTO {TABLE} (id, tenant_id, creator, biz_name, model_name, request_payload, state, priority, "
            "enqueue_at, retry_count, attempt_no, locked_by, forward_headers_encrypted, created_at, updated_at) "
            f"SELECT %s, %s, %s, %s, m.model_name, {payload}, 0, 1, %s, 0, 0, '', %s, %s, %s FROM {models_table} m "
            "WHERE m.model_name = %s AND m.enabled AND CASE WHEN m.queue_limit = 0 THEN TRUE ELSE "
            f"(SELECT count(*) FROM {TABLE} q WHERE q.state = 0 AND q.model_name = m.model_name) < m.queue_limit END",
            [
                task_id,
                tenant_id,
                creator,
                biz_name,
                json.dumps(request_payload),
                now,
                forward_headers_encrypted,
                now,
                now,
                model_name,
            ],
        )
        == 1
    )


# --- the worker ---------------------------------------------------------------------------


_CLAIM_SET = (
    "state = 1, attempt_no = attempt_no + 1, locked_by = %s, lease_until = %s, started_at = %s, "
    "finished_at = NULL, updated_at = %s"
)


def claim_next(
    *,
    model_names: Sequence[str],
    exclude: Sequence[tuple[str, str]],
    limit: int,
    worker_id: str,
    now: dt.datetime,
    lease_until: dt.datetime,
    count_calls: bool = False,
) -> list[AsynchTask]:
    """0 → 1 for the first ``limit`` queued tasks of the given models, in queue
    order, skipping the (tenant, model) pairs in ``exclude``: ONE statement, the pick
    under ``FOR UPDATE SKIP LOCKED`` so any number of workers never take one task
    twice. A materialized CTE applies the LIMIT once (``id IN (SELECT ... LIMIT)``
    may be planned as a join that takes more rows).

    ``count_calls`` (PostgreSQL): the same statement counts the calls about to be
    made in ``asynch_model_stat`` on the platform's day, one upsert per (tenant,
    creator, model). A task that already has its model's answer (``has_answer``)
    makes no call: not counted."""
    if not model_names or limit <= 0:
        return []
    params: list[Any] = list(model_names)
    excluded = ""
    if exclude:
        excluded = " AND NOT (" + " OR ".join(["(tenant_id = %s AND model_name = %s)"] * len(exclude)) + ")"
        for tenant_id, model_name in exclude:
            params += [tenant_id, model_name]
    pick = (
        f"WITH picked AS MATERIALIZED (SELECT id FROM {TABLE} WHERE state = 0 AND model_name IN ({placeholders(model_names)})"
        f"{excluded} ORDER BY priority, enqueue_at, id LIMIT %s{_skip_locked()}) "
    )
    update = f"UPDATE {TABLE} SET {_CLAIM_SET} WHERE state = 0 AND {id_among('picked')} RETURNING {_TASK_COLUMNS}, {_HAS_ANSWER}"
    params = [*params, limit, worker_id, lease_until, now, now]
    if count_calls:
        stat = AsynchModelStat._meta.db_table
        sql = (
            f"{pick}, claimed AS ({update}), counted AS (INSERT INTO {stat} "
            "(day, tenant_id, creator, model_name, request_count, updated_at) "
            "SELECT %s, tenant_id, creator, model_name, count(*), %s FROM claimed WHERE NOT has_answer "
            "GROUP BY tenant_id, creator, model_name ON CONFLICT (day, tenant_id, creator, model_name) "
            f"DO UPDATE SET request_count = {stat}.request_count + excluded.request_count, "
            "updated_at = excluded.updated_at) SELECT * FROM claimed"
        )
        params += [platform_day(now), now]
    else:
        sql = pick + update
    tasks = list(AsynchTask.objects.raw(sql, tuple(adapt(p) for p in params)))
    tasks.sort(key=lambda task: (task.priority, task.enqueue_at, task.id))
    return tasks


def extend_leases(*, task_ids: Sequence[str], worker_id: str, lease_until: dt.datetime, now: dt.datetime) -> int:
    if not task_ids:
        return 0
    return execute(
        f"UPDATE {TABLE} SET lease_until = %s WHERE state = 1 AND locked_by = %s AND id IN ({placeholders(task_ids)})",
        [lease_until, worker_id, *task_ids],
    )


def succeed(*, task_id: str, attempt_no: int, oss_file: str, http_status: int, now: dt.datetime) -> bool:
    """1 → 2 by the holder of this attempt; the forwarded headers are dropped, used,
    and the kept answer with them (its file is stored). One statement on PostgreSQL."""
    update = (
        f"UPDATE {TABLE} SET state = 2, oss_file = %s, http_status = %s, finished_at = %s, lease_until = NULL, "
        "error_message = NULL, forward_headers_encrypted = NULL, updated_at = %s "
        "WHERE id = %s AND state = 1 AND attempt_no = %s"
    )
    params = [oss_file, http_status, now, now, task_id, attempt_no]
    if connection.vendor == "postgresql":
        gone = f"WITH gone AS (DELETE FROM {ANSWERS} WHERE task_id = %s AND EXISTS (SELECT 1 FROM {TABLE} WHERE id = %s AND state = 1 AND attempt_no = %s)) "
        return execute(gone + update, [task_id, task_id, attempt_no, *params]) == 1
    with transaction.atomic():
        if execute(update, params) != 1:
            return False
        execute(f"DELETE FROM {ANSWERS} WHERE task_id = %s", [task_id])
        return True


def keep_answer(
    *, task_id: str, attempt_no: int, content: bytes, content_type: str, http_status: int, now: dt.datetime
) -> bool:
    """Keep the model's answer of this attempt until its file is stored: one insert,
    only while the attempt is the task's."""
    return (
        execute(
            f"INSERT INTO {ANSWERS} (task_id, content, content_type, http_status, created_at) "
            f"SELECT id, %s, %s, %s, %s FROM {TABLE} WHERE id = %s AND state = 1 AND attempt_no = %s "
            "ON CONFLICT (task_id) DO UPDATE SET content = excluded.content, content_type = excluded.content_type, "
            "http_status = excluded.http_status, created_at = excluded.created_at",
            [content, content_type[:255], http_status, now, task_id, attempt_no],
        )
        == 1
    )


def kept_answer(*, task_id: str) -> AsynchTaskAnswer | None:
    return AsynchTaskAnswer.objects.filter(task_id=task_id).first()


def fail(*, task_id: str, attempt_no: int, error_message: str, http_status: int | None, now: dt.datetime) -> bool:
    """1 → 3 by the holder of this attempt."""
    return (
        execute(
            f"UPDATE {TABLE} SET state = 3, error_message = %s, http_status = %s, finished_at = %s, "
            "lease_until = NULL, updated_at = %s WHERE id = %s AND state = 1 AND attempt_no = %s",
            [error_message[:4000], http_status, now, now, task_id, attempt_no],
        )
        == 1
    )


def release(*, task_ids: Sequence[str], worker_id: str, now: dt.datetime) -> int:
    """1 → 0 for claimed tasks the worker could not start (no semaphore slot): back
    to their place in the queue (``enqueue_at`` and ``priority`` untouched), the
    attempt undone."""
    if not task_ids:
        return 0
    return execute(
        f"UPDATE {TABLE} SET state = 0, attempt_no = attempt_no - 1, locked_by = '', lease_until = NULL, "
        f"started_at = NULL, updated_at = %s WHERE state = 1 AND locked_by = %s AND id IN ({placeholders(task_ids)})",
        [now, worker_id, *task_ids],
    )


# --- the batch pickup ----------------------------------------------------------------------


def mark_downloaded(*, task_ids: Sequence[str], expire_at: dt.datetime, now: dt.datetime) -> list[str]:
    """2 → 4 with ``expire_at``; only succeeded tasks move."""
    if not task_ids:
        return []
    rows = fetch(
        f"UPDATE {TABLE} SET state = 4, expire_at = %s, updated_at = %s "
        f"WHERE state = 2 AND id IN ({placeholders(task_ids)}) RETURNING id",
        [expire_at, now, *task_ids],
    )
    return [row[0] for row in rows]


# --- the cleaner ---------------------------------------------------------------------------


def promote_waiting_retries(*, now: dt.datetime, limit: int) -> int:
    """Retries that waited at the tail for ``retryQueueMaxSeconds`` move to the head."""
    ids = [
        row[0]
        for row in fetch(
            f"SELECT id FROM {TABLE} WHERE state = 0 AND priority = 1 AND jump_at <= %s "
            f"ORDER BY jump_at LIMIT %s{_skip_locked()}",
            [now, limit],
        )
    ]
    if not ids:
        return 0
    return execute(
        f"UPDATE {TABLE} SET priority = 0, updated_at = %s WHERE state = 0 AND priority = 1 AND id IN ({placeholders(ids)})",
        [now, *ids],
    )


def _stuck(
    now: dt.datetime, queued_before: dt.datetime, started_before: dt.datetime, long_running: dict[str, dt.datetime]
) -> tuple[str, list[Any]]:
    """Running tasks whose worker stopped renewing its lease; tasks that sat in 0 past
    ``ASYNCH_TASK_TIMEOUT_SECONDS``; running tasks past it too, but for those of the
    models in ``long_running`` (whose ``timeoutSeconds`` is longer), which are stuck
    only past their own moment: a live call is never failed before its model's timeout."""
    long_names = list(long_running)
    others = f" AND model_name NOT IN ({placeholders(long_names)})" if long_names else ""
    sql = f"(state = 1 AND lease_until < %s) OR (state = 0 AND enqueue_at < %s) OR (state = 1 AND started_at < %s{others})"
    params: list[Any] = [now, queued_before, started_before, *long_names]
    for name, before in long_running.items():
        sql += " OR (state = 1 AND model_name = %s AND started_at < %s)"
        params += [name, before]
    return sql, params


def stuck_ids(
    *,
    now: dt.datetime,
    queued_before: dt.datetime,
    started_before: dt.datetime,
    limit: int,
    long_running: dict[str, dt.datetime] | None = None,
) -> list[str]:
    condition, params = _stuck(now, queued_before, started_before, long_running or {})
    rows = fetch(f"SELECT id FROM {TABLE} WHERE {condition} ORDER BY id LIMIT %s{_skip_locked()}", [*params, limit])
    return [row[0] for row in rows]


def fail_stuck(
    *,
    task_ids: Sequence[str],
    now: dt.datetime,
    queued_before: dt.datetime,
    started_before: dt.datetime,
    long_running: dict[str, dt.datetime] | None = None,
) -> int:
    if not task_ids:
        return 0
    condition, params = _stuck(now, queued_before, started_before, long_running or {})
    return execute(
        f"UPDATE {TABLE} SET state = 3, finished_at = %s, lease_until = NULL, updated_at = %s, error_message = "
        "CASE WHEN state = 0 THEN 'Timed out waiting in the queue' "
        "WHEN lease_until < %s THEN 'The worker running the task stopped (its lease lapsed)' "
        "ELSE 'Timed out while running' END "
        f"WHERE id IN ({placeholders(task_ids)}) AND ({condition})",
        [now, now, now, *task_ids, *params],
    )


def retryable_ids(*, model_name: str, retry_times: int, limit: int) -> list[str]:
    rows = fetch(
        f"SELECT id FROM {TABLE} WHERE state = 3 AND model_name = %s AND retry_count < %s "
        f"ORDER BY finished_at, id LIMIT %s{_skip_locked()}",
        [model_name, retry_times, limit],
    )
    return [row[0] for row in rows]


def requeue(*, task_ids: Sequence[str], to_head: bool, jump_at: dt.datetime | None, now: dt.datetime) -> int:
    """3 → 0 with ``retryCount + 1``: at the tail (``enqueue_at = now``), or at the head."""
    if not task_ids:
        return 0
    return execute(
        f"UPDATE {TABLE} SET state = 0, retry_count = retry_count + 1, priority = %s, enqueue_at = %s, "
        "jump_at = %s, started_at = NULL, finished_at = NULL, lease_until = NULL, locked_by = '', updated_at = %s "
        f"WHERE state = 3 AND id IN ({placeholders(task_ids)})",
        [0 if to_head else 1, now, jump_at, now, *task_ids],
    )


def expired_download_rows(*, now: dt.datetime, limit: int) -> list[tuple[str, str | None]]:
    return fetch(
        f"SELECT id, oss_file FROM {TABLE} WHERE state = 4 AND expire_at <= %s ORDER BY expire_at LIMIT %s"
        f"{_skip_locked()}",
        [now, limit],
    )


def exhausted_failure_rows(
    *, model_names: Sequence[str], known: bool, retry_times: int, failed_before: dt.datetime, limit: int
) -> list[tuple[str, str | None]]:
    """Failed tasks with no retry left, failed before ``failed_before``: of the named
    models (``known``), or of every model not named (configs that were deleted)."""
    if known and not model_names:
        return []
    names = f"model_name {'IN' if known else 'NOT IN'} ({placeholders(model_names)})" if model_names else "TRUE"
    return fetch(
        f"SELECT id, oss_file FROM {TABLE} WHERE state = 3 AND {names} AND retry_count >= %s "
        f"AND finished_at <= %s ORDER BY finished_at LIMIT %s{_skip_locked()}",
        [*model_names, retry_times, failed_before, limit],
    )


def delete(*, task_ids: Sequence[str], states: Sequence[int]) -> list[tuple[str, str | None]]:
    """Hard delete, still in one of ``states``, with any answer kept for them; returns
    (id, stored file) of what went. Inside the caller's transaction."""
    if not task_ids:
        return []
    ids, states_in = placeholders(task_ids), placeholders(states)
    execute(
        f"DELETE FROM {ANSWERS} WHERE task_id IN (SELECT id FROM {TABLE} WHERE state IN ({states_in}) AND id IN ({ids}))",
        [*states, *task_ids],
    )
    gone = fetch(
        f"DELETE FROM {TABLE} WHERE state IN ({states_in}) AND id IN ({ids}) RETURNING id, oss_file",
        [*states, *task_ids],
    )
    return gone
