"""The drain: one per worker process at a time, run by the Celery task
``asynch.tasks.work``. It claims as many tasks as it has free call threads, hands
them to the threads, collects what they did, renews the leases of what still runs,
and goes on until nothing is left that it may run.

While the database or Redis cannot be reached it claims nothing (no call without a
slot) but keeps collecting and renewing for the calls already made, so their answers
are stored; it ends once none runs, and beat's next poll starts a fresh one."""

from __future__ import annotations

import datetime as dt
import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections import Counter

from django.conf import settings
from django.db import close_old_connections, connections
from django.utils import timezone

from asynch import transitions
from asynch.kick import KICK_KEY, worker_kick
from asynch.semaphore import flag_clear, get_semaphore
from asynch.worker.calls import Claimed, ModelCall, model_calls, task_execute
from asynch.worker.claims import tasks_claim
from config.errors import OUTAGE_ERRORS
from config.observability.logging import Throttled

logger = logging.getLogger(__name__)
_warn = Throttled(logger)

_drain_lock = threading.Lock()
_more = threading.Event()


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def tasks_drain(*, budget_seconds: float | None = None) -> Counter[str]:
    """Run queued tasks until none is left that this process may run, or the budget
    (``ASYNCH_WORKER_DRAIN_SECONDS``) is spent, in which case another drain is queued.

    One drain per process: a kick that finds one running leaves ``_more`` set, and
    the running drain, which checks it after releasing the lock, goes round again,
    so no kick is ever swallowed."""
    totals: Counter[str] = Counter()
    if not settings.ASYNCH_WORKER_ENABLED:
        return totals
    budget = budget_seconds if budget_seconds is not None else settings.ASYNCH_WORKER_DRAIN_SECONDS
    _more.set()
    while _more.is_set():
        if not _drain_lock.acquire(blocking=False):
            return totals  # the drain holding the lock sees _more
        try:
            _more.clear()
            _clear_kick()  # from now on a new task wakes a drain again
            Drain(totals, budget).run()
        finally:
            _drain_lock.release()
    return totals


def _clear_kick() -> None:
    try:
        flag_clear(KICK_KEY)
    except OUTAGE_ERRORS as error:  # Redis down: the flag, if it survives, expires by itself
        _warn.warning("kick", "asynch: the kick flag was not cleared (%s: %s)", type(error).__name__, error)


def _call_thread(inbox: queue.Queue[Claimed | None], outbox: queue.Queue[tuple[Claimed, str]]) -> None:
    """One of the drain's call threads: it keeps its database connection for the
    drain's life and closes it when the drain ends."""
    try:
        while (item := inbox.get()) is not None:
            try:
                outcome = task_execute(item)
            except BaseException:
                logger.exception("asynch: a call thread failed")
                outcome = "error"
            outbox.put((item, outcome))
    finally:
        connections.close_all()


class Drain:
    """One drain's state, and its rounds: claim, wait for answers, renew."""

    def __init__(self, totals: Counter[str], budget_seconds: float) -> None:
        self.totals = totals
        self.me = worker_id()
        self.size = max(1, settings.ASYNCH_WORKER_CONCURRENCY)
        self.lease = settings.ASYNCH_LEASE_SECONDS
        self.beat_every = max(0.2, self.lease / 3)
        self.poll = max(0.05, settings.ASYNCH_WORKER_POLL_INTERVAL)
        self.deadline = time.monotonic() + budget_seconds
        self.inbox: queue.Queue[Claimed | None] = queue.Queue()
        self.outbox: queue.Queue[tuple[Claimed, str]] = queue.Queue()
        self.threads: list[threading.Thread] = []
        self.running: dict[str, Claimed] = {}
        self.last_beat = time.monotonic()
        self.woke_another = False
        self.calls: dict[str, ModelCall] = {}
        self.calls_read = float("-inf")
        self.out_of_time = False
        self.last_look = False
        # (tenant, model) pairs whose slots are all held: claims look past them a while.
        self.saturated: set[tuple[str, str]] = set()
        self.saturated_at = time.monotonic()

    def run(self) -> None:
        try:
            while self.round():
                pass
        finally:
            for _ in self.threads:
                self.inbox.put(None)
            for thread in self.threads:
                thread.join()
        if self.out_of_time:
            worker_kick()  # a fresh Celery task takes over

    def round(self) -> bool:
        """One round; False once the drain is done."""
        self.out_of_time = time.monotonic() >= self.deadline
        try:
            if self.claim():
                self.last_look = False
        except OUTAGE_ERRORS as error:
            _warn.warning("claim", "asynch: claiming paused, %s: %s", type(error).__name__, error)
            close_old_connections()  # a connection the database dropped is replaced at the next claim
            if not self.running:
                return False  # nothing of ours is running: beat's poll starts a fresh drain
            time.sleep(self.poll)
        if not self.running and self.saturated and not self.out_of_time:
            # Tasks wait whose (tenant, model) slots are all held elsewhere: poll
            # until one frees, so this process takes its share.
            time.sleep(self.poll)
            return True
        if not self.running:
            if self.last_look:
                return False
            # Looks empty. Clear the kick flag, then look once more: a task committed
            # before the clear is seen now, one committed after it sends a new kick.
            _clear_kick()
            self.last_look = True
            return True
        self.collect()
        self.renew_if_due()
        return True

    def claim(self) -> list[Claimed]:
        """Claim in batches: once half the threads are free (or none is busy), so a
        busy drain makes one claim per few calls, not one per call."""
        free = self.size - len(self.running)
        if free <= 0 or (free < (self.size + 1) // 2 and self.running) or self.out_of_time:
            return []
        if time.monotonic() - self.calls_read > self.poll:  # configs change rarely: read once per poll
            self.calls, self.calls_read = model_calls(), time.monotonic()
        if time.monotonic() - self.saturated_at > self.poll:  # a slot elsewhere may have freed up
            self.saturated, self.saturated_at = set(), time.monotonic()
        claimed = tasks_claim(
            calls=self.calls,
            limit=min(free, settings.ASYNCH_WORKER_BATCH_SIZE),
            worker_id=self.me,
            saturated=self.saturated,
        )
        for item in claimed:
            self.dispatch(item)
        self.totals["claimed"] += len(claimed)
        if claimed and len(claimed) == free and not self.woke_another:
            worker_kick()  # every thread is busy and more may wait: let another process join
            self.woke_another = True
        return claimed

    def dispatch(self, item: Claimed) -> None:
        if len(self.threads) < self.size:
            thread = threading.Thread(target=_call_thread, args=(self.inbox, self.outbox), daemon=True)
            thread.start()
            self.threads.append(thread)
        self.running[item.task.id] = item
        self.inbox.put(item)

    def collect(self) -> None:
        """Wait for a call to finish (a poll while threads are free, else until the
        next renewal), then take every other answer that came in meanwhile."""
        try:
            item, outcome = self.outbox.get(timeout=self.poll if len(self.running) < self.size else self.beat_every)
            while True:
                self.running.pop(item.task.id, None)
                self.saturated.discard((item.task.tenant_id, item.task.model_name))  # its slot is free now
                self.totals[outcome] += 1
                item, outcome = self.outbox.get_nowait()
        except queue.Empty:
            pass

    def renew_if_due(self) -> None:
        """Every third of a lease: the slots' and the tasks' leases of what still runs.
        A renewal that fails (Redis or the database down) is tried again every poll,
        so the leases are back in hand as soon as the service is."""
        if time.monotonic() - self.last_beat < self.beat_every or not self.running:
            return
        items = list(self.running.values())
        renewed_all = True
        slotted = [c for c in items if c.slot_token]  # a kept answer's upload holds no slot
        try:
            renewed = get_semaphore().renew([(c.slot_key, c.slot_token) for c in slotted], lease_seconds=self.lease)
            for item, ok in zip(slotted, renewed, strict=True):
                if not ok:
                    logger.warning("asynch: the slot of task %s lapsed while its call ran", item.task.id)
        except OUTAGE_ERRORS as error:
            renewed_all = False
            _warn.warning("renew-slots", "asynch: slots not renewed, %s: %s", type(error).__name__, error)
        try:
            now = timezone.now()
            transitions.extend_leases(
                task_ids=[c.task.id for c in items],
                worker_id=self.me,
                lease_until=now + dt.timedelta(seconds=self.lease),
                now=now,
            )
        except OUTAGE_ERRORS as error:
            renewed_all = False
            _warn.warning("renew-leases", "asynch: task leases not renewed, %s: %s", type(error).__name__, error)
            close_old_connections()
        self.last_beat = time.monotonic() if renewed_all else time.monotonic() - self.beat_every + self.poll
