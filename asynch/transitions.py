"""The task state machine of model-asynch, in one place.

    0 queued ──claim──▶ 1 running ──succeed──▶ 2 succeeded ──getTaskBatch──▶ 4 downloaded ──expireAt──▶ deleted
        ▲                   │
        │                   └──fail / lease lapsed / stuck──▶ 3 failed ──retries exhausted, retention──▶ deleted
        └────────── cleaner retry (retryCount + 1, tail or head) ◀──┘
    0 queued ──stuck past ASYNCH_TASK_TIMEOUT_SECONDS──▶ 3 failed

Every transition is one conditional ``UPDATE`` whose row count decides: a worker
whose lease lapsed, or whose task was failed as stuck, finishes nothing because
it no longer matches ``state = 1 AND attempt_no = <its attempt>``. The statements are
``asynch.queries``'; times are passed in. Those PostgreSQL's alone (lists as arrays,
SKIP LOCKED, data-modifying CTEs) are said with the ORM on the embedded default
(SQLite), a read and the write after it in one transaction (here or the cleaner's):
SQLite's writers take the database's lock at ``BEGIN`` (``transaction_mode``
IMMEDIATE), so no other writer comes between them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from functools import reduce
from operator import or_
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, Exists, F, OuterRef, Q, QuerySet, Value, When

from asynch import events, queries
from asynch.models import AsynchTask, AsynchTaskAnswer
from config.days import platform_day
from config.sql import execute, fetch, from_row

_PAYLOAD = AsynchTask._meta.get_field("request_payload")


def _postgresql() -> bool:
    return connection.vendor == "postgresql"


# --- creating ----------------------------------------------------------------------------


def _skip_locked(tasks: QuerySet[AsynchTask]) -> QuerySet[AsynchTask]:
    """Rows the caller's transaction locks, passing over those another transaction
    holds (two cleaners never take one task); SQLite locks the whole database instead
    and Django leaves the clause out there."""
    return tasks.select_for_update(skip_locked=True)


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
    """→ 0: the task inserted, in one statement, if its model takes it (``ENQUEUE``)."""
    params = {
        "task_id": task_id,
        "tenant_id": tenant_id,
        "creator": creator,
        "biz_name": biz_name,
        "model_name": model_name,
        # As the ORM writes a JSON value: jsonb on PostgreSQL, text on SQLite.
        "request_payload": _PAYLOAD.get_db_prep_save(request_payload, connection),
        "forward_headers_encrypted": forward_headers_encrypted,
        "now": now,
    }
    return execute(queries.ENQUEUE, params) == 1


# --- the worker ---------------------------------------------------------------------------


def claim_next(
    *,
    model_names: Sequence[str],
    exclude: Sequence[tuple[str, str]],
    limit: int,
    worker_id: str,
    now: dt.datetime,
    lease_until: dt.datetime,
) -> list[AsynchTask]:
    """0 → 1 for the first ``limit`` queued tasks of the given models, in queue order,
    skipping the (tenant, model) pairs in ``exclude``; each task says whether its model
    already answered it (``has_answer``: no call to make). Any number of workers never
    take one task twice. On PostgreSQL one statement (``CLAIM``), which also counts the
    calls about to be made in the statistics of the platform's day; on SQLite nothing
    is counted here."""
    if not model_names or limit <= 0:
        return []
    if _postgresql():
        params = {
            "model_names": list(model_names),
            "saturated_tenants": [tenant_id for tenant_id, _ in exclude],
            "saturated_models": [model_name for _, model_name in exclude],
            "limit": limit,
            "worker_id": worker_id,
            "lease_until": lease_until,
            "now": now,
            "day": platform_day(now),
        }
        tasks = []
        for row in fetch(queries.CLAIM, params):
            task = from_row(AsynchTask, row)
            task.has_answer = row[-1]  # type: ignore[attr-defined]
            tasks.append(task)
    else:
        queued = AsynchTask.objects.filter(state=0, model_name__in=model_names)
        if exclude:
            queued = queued.exclude(reduce(or_, (Q(tenant_id=t, model_name=m) for t, m in exclude)))
        with transaction.atomic():
            ids = list(queued.order_by("priority", "enqueue_at", "id").values_list("id", flat=True)[:limit])
            AsynchTask.objects.filter(state=0, id__in=ids).update(
                state=1,
                attempt_no=F("attempt_no") + 1,
                locked_by=worker_id,
                lease_until=lease_until,
                started_at=now,
                finished_at=None,
                updated_at=now,
            )
            answered = Exists(AsynchTaskAnswer.objects.filter(task_id=OuterRef("id")))
            tasks = list(AsynchTask.objects.filter(id__in=ids).annotate(has_answer=answered))
    tasks.sort(key=lambda task: (task.priority, task.enqueue_at, task.id))
    return tasks


def extend_leases(*, task_ids: Sequence[str], worker_id: str, lease_until: dt.datetime, now: dt.datetime) -> int:
    if not task_ids:
        return 0
    if _postgresql():  # the drain renews every few seconds: a prepared statement
        params = {"task_ids": list(task_ids), "worker_id": worker_id, "lease_until": lease_until}
        return execute(queries.EXTEND_LEASES, params)
    running = AsynchTask.objects.filter(state=1, locked_by=worker_id, id__in=task_ids)
    return running.update(lease_until=lease_until)


def succeed(*, task_id: str, attempt_no: int, oss_file: str, http_status: int, now: dt.datetime) -> bool:
    """1 → 2 by the holder of this attempt; the forwarded headers are dropped, used,
    and the kept answer with them (its file is stored). The tenant's webhooks are
    written in the same transaction (``asynch.events``)."""
    with transaction.atomic():
        moved = _succeed(task_id=task_id, attempt_no=attempt_no, oss_file=oss_file, http_status=http_status, now=now)
        if moved:
            events.task_finished(task_id=task_id, now=now)
    return moved


def _succeed(*, task_id: str, attempt_no: int, oss_file: str, http_status: int, now: dt.datetime) -> bool:
    if _postgresql():
        params = {
            "task_id": task_id,
            "attempt_no": attempt_no,
            "oss_file": oss_file,
            "http_status": http_status,
            "now": now,
        }
        return execute(queries.SUCCEED, params) == 1
    with transaction.atomic():
        moved = AsynchTask.objects.filter(id=task_id, state=1, attempt_no=attempt_no).update(
            state=2,
            oss_file=oss_file,
            http_status=http_status,
            finished_at=now,
            lease_until=None,
            error_message=None,
            forward_headers_encrypted=None,
            updated_at=now,
        )
        if moved != 1:
            return False
        AsynchTaskAnswer.objects.filter(task_id=task_id).delete()
        return True


def keep_answer(
    *, task_id: str, attempt_no: int, content: bytes, content_type: str, http_status: int, now: dt.datetime
) -> bool:
    """Keep the model's answer of this attempt until its file is stored: one insert,
    only while the attempt is the task's."""
    params = {
        "task_id": task_id,
        "attempt_no": attempt_no,
        "content": content,
        "content_type": content_type[:255],
        "http_status": http_status,
        "now": now,
    }
    return execute(queries.KEEP_ANSWER, params) == 1


def kept_answer(*, task_id: str) -> AsynchTaskAnswer | None:
    return AsynchTaskAnswer.objects.filter(task_id=task_id).first()


def fail(*, task_id: str, attempt_no: int, error_message: str, http_status: int | None, now: dt.datetime) -> bool:
    """1 → 3 by the holder of this attempt; a failure with no retry left writes the
    tenant's webhooks in the same transaction (``asynch.events``)."""
    params = {
        "task_id": task_id,
        "attempt_no": attempt_no,
        "error_message": error_message[:4000],
        "http_status": http_status,
        "now": now,
    }
    with transaction.atomic():
        moved = execute(queries.FAIL, params) == 1
        if moved:
            events.task_finished(task_id=task_id, now=now)
    return moved


def release(*, task_ids: Sequence[str], worker_id: str, now: dt.datetime) -> int:
    """1 → 0 for claimed tasks the worker could not start (no semaphore slot): back
    to their place in the queue, the attempt undone."""
    if not task_ids:
        return 0
    if _postgresql():  # on the drain's way, as often as a claim finds no slot
        return execute(queries.RELEASE, {"task_ids": list(task_ids), "worker_id": worker_id, "now": now})
    return AsynchTask.objects.filter(state=1, locked_by=worker_id, id__in=task_ids).update(
        state=0, attempt_no=F("attempt_no") - 1, locked_by="", lease_until=None, started_at=None, updated_at=now
    )


# --- the batch pickup ----------------------------------------------------------------------


def mark_downloaded(*, task_ids: Sequence[str], expire_at: dt.datetime, now: dt.datetime) -> list[str]:
    """2 → 4 with ``expire_at``; only succeeded tasks move."""
    if not task_ids:
        return []
    if _postgresql():
        params = {"task_ids": list(task_ids), "expire_at": expire_at, "now": now}
        return [row[0] for row in fetch(queries.MARK_DOWNLOADED, params)]
    with transaction.atomic():
        ids = list(AsynchTask.objects.filter(state=2, id__in=task_ids).values_list("id", flat=True))
        AsynchTask.objects.filter(state=2, id__in=ids).update(state=4, expire_at=expire_at, updated_at=now)
    return ids


# --- the cleaner ---------------------------------------------------------------------------


def promote_waiting_retries(*, now: dt.datetime, limit: int) -> int:
    """Retries that waited at the tail for ``retryQueueMaxSeconds`` move to the head."""
    if _postgresql():
        return execute(queries.PROMOTE_WAITING_RETRIES, {"now": now, "limit": limit})
    waiting = AsynchTask.objects.filter(state=0, priority=1, jump_at__lte=now)
    ids = list(waiting.order_by("jump_at").values_list("id", flat=True)[:limit])
    return AsynchTask.objects.filter(state=0, priority=1, id__in=ids).update(priority=0, updated_at=now)


def fail_stuck(
    *,
    now: dt.datetime,
    queued_before: dt.datetime,
    started_before: dt.datetime,
    limit: int,
    long_running: dict[str, dt.datetime] | None = None,
) -> int:
    """→ 3 for up to ``limit`` stuck tasks: running tasks whose worker stopped renewing
    its lease; tasks that sat in 0 past ``ASYNCH_TASK_TIMEOUT_SECONDS``; running tasks
    past it too, but for those of the models in ``long_running`` (whose
    ``timeoutSeconds`` is longer), stuck only past their own moment: a live call is
    never failed before its model's timeout. The number failed; those with no retry
    left write their webhooks (``asynch.events``) in the caller's transaction."""
    long_running = long_running or {}
    if _postgresql():
        params = {
            "now": now,
            "queued_before": queued_before,
            "started_before": started_before,
            "long_names": list(long_running),
            "long_started_before": list(long_running.values()),
            "limit": limit,
        }
        failed = [row[0] for row in fetch(queries.FAIL_STUCK, params)]
        for task_id in failed:  # in the caller's transaction (the cleaner's batch)
            events.task_finished(task_id=task_id, now=now)
        return len(failed)
    stuck = reduce(
        or_,
        (Q(state=1, model_name=name, started_at__lt=before) for name, before in long_running.items()),
        Q(state=1, lease_until__lt=now)
        | Q(state=0, enqueue_at__lt=queued_before)
        | (Q(state=1, started_at__lt=started_before) & ~Q(model_name__in=list(long_running))),
    )
    ids = list(AsynchTask.objects.filter(stuck).order_by("id").values_list("id", flat=True)[:limit])
    why = Case(
        When(state=0, then=Value("Timed out waiting in the queue")),
        When(lease_until__lt=now, then=Value("The worker running the task stopped (its lease lapsed)")),
        default=Value("Timed out while running"),
    )
    failed = AsynchTask.objects.filter(stuck, id__in=ids).update(
        state=3, finished_at=now, lease_until=None, updated_at=now, error_message=why
    )
    for task_id in ids:  # in the caller's transaction, which holds SQLite's write lock
        events.task_finished(task_id=task_id, now=now)
    return failed


def retryable_ids(*, model_name: str, retry_times: int, limit: int) -> list[str]:
    """A model's failed tasks with retries left, the oldest failures first (locked,
    skipping those another cleaner holds, where the database can)."""
    failed = AsynchTask.objects.filter(state=3, model_name=model_name, retry_count__lt=retry_times)
    return list(_skip_locked(failed.order_by("finished_at", "id")).values_list("id", flat=True)[:limit])


def requeue(*, task_ids: Sequence[str], to_head: bool, jump_at: dt.datetime | None, now: dt.datetime) -> int:
    """3 → 0 with ``retryCount + 1``: at the tail (``enqueue_at = now``), or at the head."""
    if not task_ids:
        return 0
    priority = 0 if to_head else 1
    return AsynchTask.objects.filter(state=3, id__in=task_ids).update(
        state=0,
        retry_count=F("retry_count") + 1,
        priority=priority,
        enqueue_at=now,
        jump_at=jump_at,
        started_at=None,
        finished_at=None,
        lease_until=None,
        locked_by="",
        updated_at=now,
    )


def expired_download_rows(*, now: dt.datetime, limit: int) -> list[tuple[str, str | None]]:
    """Downloaded tasks past ``expire_at``, with their stored files."""
    expired = AsynchTask.objects.filter(state=4, expire_at__lte=now).order_by("expire_at")
    return list(_skip_locked(expired).values_list("id", "oss_file")[:limit])


def exhausted_failure_rows(
    *, model_name: str, retry_times: int, failed_before: dt.datetime, limit: int
) -> list[tuple[str, str | None]]:
    """A model's failed tasks with no retry left, failed before ``failed_before``."""
    failed = AsynchTask.objects.filter(
        state=3, model_name=model_name, retry_count__gte=retry_times, finished_at__lte=failed_before
    )
    return list(_skip_locked(failed.order_by("finished_at")).values_list("id", "oss_file")[:limit])


def orphaned_failure_rows(
    *, known_models: Sequence[str], failed_before: dt.datetime, limit: int
) -> list[tuple[str, str | None]]:
    """Failed tasks of the models no config names (deleted since), failed before
    ``failed_before``: with no config, no retry is left."""
    failed = AsynchTask.objects.filter(state=3, finished_at__lte=failed_before).exclude(model_name__in=known_models)
    return list(_skip_locked(failed.order_by("finished_at")).values_list("id", "oss_file")[:limit])


def delete(*, task_ids: Sequence[str], states: Sequence[int]) -> list[tuple[str, str | None]]:
    """Hard delete, still in one of ``states``, with any answer kept for them; returns
    (id, stored file) of what went. Inside the caller's transaction."""
    if not task_ids:
        return []
    if _postgresql():
        return fetch(queries.DELETE_TASKS, {"task_ids": list(task_ids), "states": list(states)})  # type: ignore[return-value]
    gone = list(AsynchTask.objects.filter(state__in=states, id__in=task_ids).values_list("id", "oss_file"))
    ids = [task_id for task_id, _ in gone]
    AsynchTaskAnswer.objects.filter(task_id__in=ids).delete()
    AsynchTask.objects.filter(id__in=ids).delete()
    return gone
