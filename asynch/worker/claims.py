"""Claiming queued tasks together with a slot of their (tenant, model) semaphore, so
no more than ``maxConcurrency`` calls run at once anywhere."""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections import Counter

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from asynch import transitions
from asynch.models import AsynchTask
from asynch.semaphore import get_semaphore, semaphore_key
from asynch.services import stat_count_call
from asynch.worker.calls import Claimed, ModelCall


def tasks_claim(
    *, calls: dict[str, ModelCall], limit: int, worker_id: str, saturated: set[tuple[str, str]] | None = None
) -> list[Claimed]:
    """Claim up to ``limit`` queued tasks, each with a semaphore slot of its
    (tenant, model): one statement moves the first queued tasks 0 → 1 (SKIP LOCKED),
    then one script per (tenant, model) takes as many slots as are free; tasks left
    without a slot go straight back to their place in the queue, and their pair is
    added to ``saturated`` so the next claims look past it. All in one transaction:
    a task shows state 1 only while a call holds a slot for it."""
    saturated = set() if saturated is None else saturated
    semaphore = get_semaphore()
    lease = settings.ASYNCH_LEASE_SECONDS
    now = timezone.now()
    # On PostgreSQL the claim counts the calls it is about to make in the same statement.
    counted = connection.vendor == "postgresql"
    # One transaction: a task moves to 1 for others to see only with its slot; one
    # without a free slot goes back to 0 before anyone can read it as running.
    with transaction.atomic():
        tasks = transitions.claim_next(
            model_names=list(calls),
            exclude=sorted(saturated),
            limit=limit,
            worker_id=worker_id,
            now=now,
            lease_until=now + dt.timedelta(seconds=lease),
        )
        by_pair: dict[tuple[str, str], list[AsynchTask]] = {}
        # A task whose model already answered (its upload failed before) only stores that
        # answer: no model call, so no slot and nothing counted (only real calls are).
        claimed: list[Claimed] = [
            Claimed(task=task, call=calls[task.model_name], slot_key="", slot_token="", counted=True, answered=True)
            for task in tasks
            if getattr(task, "has_answer", False)
        ]
        for task in tasks:
            if not getattr(task, "has_answer", False):
                by_pair.setdefault((task.tenant_id, task.model_name), []).append(task)
        unslotted: list[AsynchTask] = []
        try:
            for (tenant_id, model_name), group in by_pair.items():
                key = semaphore_key(tenant_id, model_name)
                tokens = [uuid.uuid4().hex for _ in group]
                call = calls[model_name]
                got = semaphore.acquire_many(key, limit=call.max_concurrency, tokens=tokens, lease_seconds=lease)
                slotted = zip(group[:got], tokens[:got], strict=True)
                claimed += [
                    Claimed(task=task, call=call, slot_key=key, slot_token=token, counted=counted)
                    for task, token in slotted
                ]
                if got < len(group):
                    saturated.add((tenant_id, model_name))
                    unslotted += group[got:]
        except BaseException:
            # Redis failed halfway: the transaction's rollback puts the tasks back in the
            # queue, uncounted; a slot that cannot be given back (Redis still down)
            # lapses with its lease.
            for item in claimed:
                if item.slot_token:
                    with contextlib.suppress(Exception):
                        semaphore.release(item.slot_key, token=item.slot_token)
            raise
        _unclaim(unslotted, worker_id, counted, now)
    return claimed


def _unclaim(tasks: list[AsynchTask], worker_id: str, counted: bool, claimed_at: dt.datetime) -> None:
    """Back to the queue, uncalled: their calls are taken back out of the statistics."""
    if not tasks:
        return
    transitions.release(task_ids=[task.id for task in tasks], worker_id=worker_id, now=timezone.now())
    if counted:
        groups = Counter(
            (task.tenant_id, task.creator, task.model_name) for task in tasks if not getattr(task, "has_answer", False)
        )
        for (tenant_id, creator, model_name), count in groups.items():
            stat_count_call(tenant_id=tenant_id, creator=creator, model_name=model_name, now=claimed_at, calls=-count)
