"""Waking a worker: the ``asynch.tasks.work`` Celery task, sent by name (the worker
it runs kicks in its turn, so naming it here keeps this module below the worker)."""

from __future__ import annotations

import logging

from celery import current_app
from django.conf import settings

from asynch.semaphore import flag_set
from config.observability.logging import Throttled

logger = logging.getLogger(__name__)
_warn = Throttled(logger)

KICK_KEY = "asynch:kick"
WORK_TASK = "asynch.tasks.work"


def worker_kick() -> None:
    """Wake a worker. Kicks are coalesced: while one is pending no other is sent
    (the worker clears the flag as it starts, and drains until the queue is empty),
    and beat polls every ``ASYNCH_WORKER_POLL_INTERVAL`` in case one is lost. Sent
    whatever this process's ``ASYNCH_WORKER_ENABLED``: that setting says whether the
    process receiving it runs tasks (a web-only deployment still wakes its workers)."""
    timeout = max(5, int(settings.ASYNCH_WORKER_POLL_INTERVAL * 10))
    try:
        if not flag_set(KICK_KEY, ttl_seconds=timeout):
            return
        current_app.signature(WORK_TASK).delay()
    except Exception as error:  # Redis or the broker is down: beat's poll picks the task up later
        _warn.warning("kick", "asynch: could not wake a worker (%s: %s); beat's poll will", type(error).__name__, error)
