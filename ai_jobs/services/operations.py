"""What the operators' screens need written: runtime instances seen, queue samples."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from ai_jobs import queries, selectors
from ai_jobs.models import QueueSample
from config.observability.logging import Throttled
from config.sql import execute

logger = logging.getLogger(__name__)
_warn = Throttled(logger)

_seen_lock = threading.Lock()
_seen_written: dict[tuple[str, bool], float] = {}  # (instance, heartbeat) → monotonic time of the last write


def runtime_seen(*, instance_id: str, heartbeat: bool = False) -> bool:
    """Note that a runtime instance called (a heartbeat, when ``heartbeat``): one
    upsert at most every ``RUNTIME_SEEN_WRITE_SECONDS`` per instance in this process,
    so the hot path pays a dict lookup. Never fails the call: True when written."""
    key = (instance_id, heartbeat)
    now_mono = time.monotonic()
    with _seen_lock:
        if now_mono - _seen_written.get(key, float("-inf")) < settings.RUNTIME_SEEN_WRITE_SECONDS:
            return False
        _seen_written[key] = now_mono
        if len(_seen_written) > 10_000:  # instance ids come and go (host-pid): forget old ones
            _seen_written.clear()
    now = timezone.now()
    try:
        execute(
            queries.RUNTIME_SEEN,
            {"instance_id": instance_id, "now": now, "heartbeat_at": now if heartbeat else None},
        )
    except DatabaseError as error:
        with _seen_lock:
            _seen_written.pop(key, None)
        _warn.warning("seen", "runtime %s: last-seen not recorded (%s)", instance_id, type(error).__name__)
        return False
    return True


def queue_sample_record(*, now: dt.datetime | None = None) -> QueueSample:
    """The queue's depth this minute (once a minute: a second call in the same minute
    keeps the first). Retention deletes old samples (``ai_jobs.services.retention``)."""
    now = now or timezone.now()
    minute = now.replace(second=0, microsecond=0)
    counts = selectors.queue_counts(now=now)
    sample, _ = QueueSample.objects.get_or_create(
        minute=minute,
        defaults={
            "pending": counts.total("pending"),
            "pending_due": sum(counts.pending_due.values()),
            "locked": counts.total("locked"),
            "running": counts.total("running"),
        },
    )
    return sample
