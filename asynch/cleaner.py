"""The cleaner: ``asynch.tasks.clean`` every ``ASYNCH_CLEANER_INTERVAL`` (while
``ASYNCH_CLEANER_ENABLED``), and one run on demand with ``python manage.py
clean_asynch_tasks``.

One run takes five steps, each in short transactions of at most
``ASYNCH_CLEANER_BATCH_SIZE`` rows and at most ``ASYNCH_CLEANER_MAX_BATCHES`` of them,
so a run is bounded and a backlog drains over several:

1. ``fail_stuck``: tasks stuck in 0/1 past ``ASYNCH_TASK_TIMEOUT_SECONDS`` (a running
   one not before its model's ``timeoutSeconds``), and running tasks whose worker
   stopped renewing its lease, fail;
2. ``retry_failed``: failed tasks with retries left go back to the queue, at the tail,
   or at the head at once when ``retryQueueMaxSeconds`` is 0;
3. ``promote_waiting_retries``: retries that waited ``retryQueueMaxSeconds`` at the
   tail move to the head;
4. ``delete_expired_downloads``: downloaded tasks past ``expireAt`` go, with their files;
5. ``delete_exhausted_failures``: failed tasks with no retry left go ``autoCleanSeconds``
   after failing (``ASYNCH_DEFAULT_AUTO_CLEAN_SECONDS`` for a model config deleted since).

Task states change only through ``asynch.transitions``.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from asynch import transitions
from asynch.kick import worker_kick
from asynch.models import AsynchModel, TaskState
from asynch.storage import delete_quietly

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelPolicy:
    """What a model config says about its tasks' retries and retention."""

    model_name: str
    retry_times: int
    retry_queue_max_seconds: int
    auto_clean_seconds: int
    timeout_seconds: int


@dataclass
class CleanerRun:
    now: dt.datetime
    batch: int
    totals: Counter[str] = field(default_factory=Counter)
    files: list[str] = field(default_factory=list)  # deleted rows' files, removed once the rows are gone

    def in_batches(self, step: Callable[[], int]) -> None:
        """Run ``step`` (one batch, returning the rows it looked at) in its own
        transaction until a batch comes back short or the run's limit is reached."""
        for _ in range(settings.ASYNCH_CLEANER_MAX_BATCHES):
            with transaction.atomic():
                done = step()
            if done < self.batch:
                return

    def delete(self, rows: list[tuple[str, str | None]], *, state: int, counter: str) -> int:
        gone = transitions.delete(task_ids=[task_id for task_id, _ in rows], states=[state])
        self.totals[counter] += len(gone)
        self.files.extend(ref for _, ref in gone if ref)
        return len(rows)


def tasks_clean(*, now: dt.datetime | None = None, by_hand: bool = False) -> Counter[str]:
    """One run of the cleaner: the five steps, in order. ``ASYNCH_CLEANER_ENABLED``
    false stops the periodic runs; an operator's run ``by_hand`` goes ahead."""
    if not settings.ASYNCH_CLEANER_ENABLED and not by_hand:
        return Counter()
    run = CleanerRun(now=now or timezone.now(), batch=settings.ASYNCH_CLEANER_BATCH_SIZE)
    policies = [ModelPolicy(**values) for values in AsynchModel.objects.values(*ModelPolicy.__dataclass_fields__)]
    fail_stuck(run, policies)
    for policy in policies:
        retry_failed(run, policy)
    promote_waiting_retries(run)
    delete_expired_downloads(run)
    delete_exhausted_failures(run, policies)
    if run.totals["retried"] or run.totals["promoted"]:
        worker_kick()  # retries run now, not at the next poll
    # Files go after their rows' deletion committed: no row ever names a missing file.
    if run.files:
        run.totals["deletedFiles"] += delete_quietly(run.files)
    # A run that changed nothing (nearly every run) is no news: DEBUG, not a line every interval.
    logger.log(logging.INFO if any(run.totals.values()) else logging.DEBUG, "asynch cleaner: %s", dict(run.totals))
    return run.totals


def fail_stuck(run: CleanerRun, policies: list[ModelPolicy]) -> None:
    """A running task whose lease is live is stuck only once both
    ``ASYNCH_TASK_TIMEOUT_SECONDS`` and its model's ``timeoutSeconds`` (plus a lease,
    for storing the answer) have passed: a call its model allows longer is not failed
    at the global timeout."""
    timeout = settings.ASYNCH_TASK_TIMEOUT_SECONDS
    before = run.now - dt.timedelta(seconds=timeout)
    long_running = {
        policy.model_name: run.now - dt.timedelta(seconds=policy.timeout_seconds + settings.ASYNCH_LEASE_SECONDS)
        for policy in policies
        if policy.timeout_seconds + settings.ASYNCH_LEASE_SECONDS > timeout
    }

    def step() -> int:
        failed = transitions.fail_stuck(
            now=run.now, queued_before=before, started_before=before, limit=run.batch, long_running=long_running
        )
        run.totals["failedStuck"] += failed
        return failed

    run.in_batches(step)


def retry_failed(run: CleanerRun, policy: ModelPolicy) -> None:
    if not policy.retry_times:
        return
    to_head = policy.retry_queue_max_seconds == 0
    jump_at = None if to_head else run.now + dt.timedelta(seconds=policy.retry_queue_max_seconds)

    def step() -> int:
        ids = transitions.retryable_ids(model_name=policy.model_name, retry_times=policy.retry_times, limit=run.batch)
        run.totals["retried"] += transitions.requeue(task_ids=ids, to_head=to_head, jump_at=jump_at, now=run.now)
        return len(ids)

    run.in_batches(step)


def promote_waiting_retries(run: CleanerRun) -> None:
    def step() -> int:
        moved = transitions.promote_waiting_retries(now=run.now, limit=run.batch)
        run.totals["promoted"] += moved
        return moved

    run.in_batches(step)


def delete_expired_downloads(run: CleanerRun) -> None:
    run.in_batches(
        lambda: run.delete(
            transitions.expired_download_rows(now=run.now, limit=run.batch),
            state=TaskState.DOWNLOADED.value,
            counter="deletedDownloaded",
        )
    )


def delete_exhausted_failures(run: CleanerRun, policies: list[ModelPolicy]) -> None:
    """Per model config, after its ``autoCleanSeconds``; the tasks of configs deleted
    since, after ``ASYNCH_DEFAULT_AUTO_CLEAN_SECONDS`` (every failure counts as exhausted)."""
    for policy in policies:
        _delete_failures(
            run,
            partial(
                transitions.exhausted_failure_rows,
                model_name=policy.model_name,
                retry_times=policy.retry_times,
                failed_before=run.now - dt.timedelta(seconds=policy.auto_clean_seconds),
            ),
        )
    _delete_failures(
        run,
        partial(
            transitions.orphaned_failure_rows,
            known_models=[policy.model_name for policy in policies],
            failed_before=run.now - dt.timedelta(seconds=settings.ASYNCH_DEFAULT_AUTO_CLEAN_SECONDS),
        ),
    )


def _delete_failures(run: CleanerRun, rows: Callable[..., list[tuple[str, str | None]]]) -> None:
    run.in_batches(lambda: run.delete(rows(limit=run.batch), state=TaskState.FAILED.value, counter="deletedFailed"))
