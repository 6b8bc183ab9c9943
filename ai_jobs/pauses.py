"""Which job types are paused, as every web process sees them: a small per-process copy
of the paused set, read from the database at most once every ``REFRESH_SECONDS``, so a
claim pays a clock read, not a query, and a pause or resume reaches every process
within that time (the contract allows five seconds). Pausing and resuming are
``ai_jobs.services.pauses``'; a pause in this process is seen here at once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from django.db import DatabaseError

from ai_jobs.models import JobTypePause
from config.observability.logging import Throttled

logger = logging.getLogger(__name__)
_warn = Throttled(logger)

REFRESH_SECONDS = 2.0

_lock = threading.Lock()
_paused: frozenset[str] = frozenset()
_read_at = float("-inf")


def paused_types() -> frozenset[str]:
    """The paused job types, at most ``REFRESH_SECONDS`` old. A database that cannot be
    read keeps the last set known (the claim that follows says what the database says)."""
    global _paused, _read_at
    now = time.monotonic()
    if now - _read_at < REFRESH_SECONDS:
        return _paused
    with _lock:
        if now - _read_at < REFRESH_SECONDS:
            return _paused
        try:
            _paused = frozenset(JobTypePause.objects.values_list("job_type", flat=True))
        except DatabaseError as error:
            _warn.warning("read", "paused job types not read (%s); the last set known holds", type(error).__name__)
        _read_at = now
        return _paused


def forget() -> None:
    """Read the set again at the next use (this process paused or resumed a type)."""
    global _read_at
    with _lock:
        _read_at = float("-inf")


def unpaused(job_types: Sequence[str]) -> list[str]:
    """``job_types`` less the paused ones, in their order."""
    paused = paused_types()
    return [job_type for job_type in job_types if job_type not in paused] if paused else list(job_types)
