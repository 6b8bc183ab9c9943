"""What a finished task tells its tenant's webhook endpoints (contract section 11.3):
``task.succeeded`` when it succeeds, ``task.failed`` when it fails for good (state 3
with no retry left). Called by ``asynch.transitions`` inside the transaction that
finishes the task, so the deliveries (``delivery``'s outbox, handed plain values)
are written with the finish or not at all, and sent after it commits."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any
from urllib.parse import urljoin

from django.conf import settings

from asynch.models import AsynchModel, AsynchTask, TaskState
from asynch.storage import get_storage
from delivery.models import WebhookEvent
from delivery.services.webhooks import webhooks_write

logger = logging.getLogger(__name__)

_FIELDS = ("id", "tenant_id", "model_name", "state", "biz_name", "creator", "retry_count", "finished_at",
           "oss_file", "error_message")  # fmt: skip


def _iso(moment: dt.datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def _absolute(url: str) -> str:
    """A result link as an absolute URL: storage gives one, or a path on
    ``ASYNCH_PUBLIC_BASE_URL`` (a webhook has no request to take a host from)."""
    if "://" in url:
        return url
    # A host pattern (``*``, ``.example.com``) names no host a receiver could call.
    named = [host for host in settings.ALLOWED_HOSTS if host and host != "*" and not host.startswith(".")]
    base = settings.ASYNCH_PUBLIC_BASE_URL or f"https://{named[0] if named else 'localhost'}"
    return urljoin(base.rstrip("/") + "/", url.lstrip("/"))


def _result_link(ref: str | None, *, task_id: str) -> str | None:
    """The result's link, or None when storage cannot make one now: the task's success
    is never given up for its webhook (getTaskResult makes the link again)."""
    if not ref:
        return None
    try:
        return _absolute(get_storage().url(ref))
    except Exception:
        logger.warning("asynch: no result link for the webhook of task %s", task_id, exc_info=True)
        return None


def retries_left(task: AsynchTask | dict[str, Any]) -> bool:
    """Whether the cleaner will queue this failed task again (its model's ``retryTimes``;
    a deleted model has none)."""
    model_name = task["model_name"] if isinstance(task, dict) else task.model_name
    retry_count = task["retry_count"] if isinstance(task, dict) else task.retry_count
    retry_times = AsynchModel.objects.filter(model_name=model_name).values_list("retry_times", flat=True).first()
    return retry_times is not None and retry_count < retry_times


def task_finished(*, task_id: str, now: dt.datetime) -> list[str]:
    """The webhook deliveries of a task that just finished (in its transaction): none
    for a failure with a retry left. The ids written."""
    row = AsynchTask.objects.filter(id=task_id).values(*_FIELDS).first()
    if row is None or row["state"] not in (TaskState.SUCCEEDED, TaskState.FAILED):
        return []
    if row["state"] == TaskState.FAILED and retries_left(row):
        return []
    return _write(row, now)


# Failed tasks told at once by a model's change, a batch at a time.
_BATCH = 500


def tasks_out_of_retries(*, model_name: str, retry_times_before: int, retry_times_now: int, now: dt.datetime) -> int:
    """``task.failed`` for the failed tasks of ``model_name`` that had a retry left under
    ``retry_times_before`` and have none under ``retry_times_now`` (0 for a model deleted):
    the cleaner will not queue them again, so they failed for good now. In the
    transaction that changes the model. How many were told."""
    told = 0
    failed = AsynchTask.objects.filter(
        state=TaskState.FAILED, model_name=model_name,
        retry_count__gte=retry_times_now, retry_count__lt=retry_times_before,
    ).order_by("id")  # fmt: skip
    after = ""
    while True:
        rows = list(failed.filter(id__gt=after).values(*_FIELDS)[:_BATCH])
        for row in rows:
            _write(row, now)
        told += len(rows)
        if len(rows) < _BATCH:
            return told
        after = rows[-1]["id"]


def _write(row: dict[str, Any], now: dt.datetime) -> list[str]:
    succeeded = row["state"] == TaskState.SUCCEEDED
    data: dict[str, Any] = {
        "taskId": row["id"],
        "modelName": row["model_name"],
        "state": row["state"],
        "bizName": row["biz_name"],
        "creator": row["creator"],
        "retryCount": row["retry_count"],
        "finishedAt": _iso(row["finished_at"]),
    }
    if succeeded:
        data["ossFile"] = _result_link(row["oss_file"], task_id=row["id"])
    else:
        data["errorMessage"] = row["error_message"]
    event = WebhookEvent.TASK_SUCCEEDED if succeeded else WebhookEvent.TASK_FAILED
    body = {"type": str(event), "timestamp": _iso(now), "data": data}
    return webhooks_write(owner_id=row["tenant_id"], event_type=str(event), about=row["id"], body=body)
