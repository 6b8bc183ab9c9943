"""The worker (seed 003 §1.2): claims queued tasks and calls their model services.

A Celery task (``asynch.tasks.work``, sent by createTask after commit and by beat
every ``ASYNCH_WORKER_POLL_INTERVAL``) runs ``tasks_drain`` in a worker process:

- one drain per process at a time; it loops until the queue has nothing it may run;
- each round claims at most as many tasks as it has free threads
  (``ASYNCH_WORKER_CONCURRENCY``, at most ``ASYNCH_WORKER_BATCH_SIZE`` a round) with
  ``SELECT ... FOR UPDATE SKIP LOCKED``, so any number of processes on any number of
  machines never take one task twice;
- a task is claimed only together with a slot of its (tenant, model) semaphore, so
  no more than ``maxConcurrency`` calls run at once anywhere; a (tenant, model)
  whose slots are all taken is skipped for the round and its tasks keep their place;
- while calls run the drain renews the slots' and the tasks' leases; a process
  that dies stops renewing and the cleaner fails its tasks, then retries them;
- a drain whose threads are all busy wakes another process to join in.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests
from django.conf import settings
from django.db import close_old_connections, connection, connections
from django.utils import timezone

from asynch import crypto, transitions
from asynch.headers import parse_api_key
from asynch.models import AsynchModel, AsynchTask
from asynch.semaphore import flag_clear, get_semaphore, semaphore_key
from asynch.services import KICK_KEY, model_api_key, stat_count_call, worker_kick
from asynch.storage import ResultFile, StorageError, get_storage
from config.observability.context import bound
from config.observability.metrics import ASYNCH_CALLS

logger = logging.getLogger(__name__)

_drain_lock = threading.Lock()
_more = threading.Event()
_local = threading.local()


@dataclass(frozen=True)
class ModelCall:
    """What a call needs from its model config, read once per round."""

    model_name: str
    url: str
    http_method: str
    headers: dict[str, str]
    timeout_seconds: int
    max_concurrency: int

    def __repr__(self) -> str:  # the headers carry the model's key
        return f"ModelCall({self.model_name}, {self.http_method} {self.url})"


@dataclass(frozen=True)
class Claimed:
    task: AsynchTask
    call: ModelCall
    slot_key: str
    slot_token: str
    counted: bool = False  # the claim already counted the call in the statistics


def _model_calls() -> dict[str, ModelCall]:
    calls = {}
    for model in AsynchModel.objects.filter(enabled=True):
        route = model.route.strip()
        url = model.base_url.rstrip("/") + ("/" + route.lstrip("/") if route else "")
        try:
            headers = parse_api_key(model_api_key(model))
        except Exception:
            logger.error("asynch: the apiKey of model %s cannot be read; its tasks wait", model.model_name)
            continue
        calls[model.model_name] = ModelCall(
            model_name=model.model_name,
            url=url,
            http_method=model.http_method,
            headers=headers,
            timeout_seconds=model.timeout_seconds,
            max_concurrency=max(1, model.max_concurrency),
        )
    return calls


def tasks_claim(
    *, calls: dict[str, ModelCall], limit: int, worker_id: str, saturated: set[tuple[str, str]] | None = None
) -> list[Claimed]:
    """Claim up to ``limit`` queued tasks, each with a semaphore slot of its
    (tenant, model): one statement moves the first queued tasks 0 → 1 (SKIP LOCKED),
    then one script per (tenant, model) takes as many slots as are free; tasks left
    without a slot go straight back to their place in the queue, and their pair is
    added to ``saturated`` so the next claims look past it."""
    saturated = set() if saturated is None else saturated
    semaphore = get_semaphore()
    lease = settings.ASYNCH_LEASE_SECONDS
    now = timezone.now()
    # On PostgreSQL the claim counts the calls it is about to make in the same statement.
    counted = connection.vendor == "postgresql"
    tasks = transitions.claim_next(
        model_names=list(calls),
        exclude=sorted(saturated),
        limit=limit,
        worker_id=worker_id,
        now=now,
        lease_until=now + dt.timedelta(seconds=lease),
        count_calls=counted,
    )
    by_pair: dict[tuple[str, str], list[AsynchTask]] = {}
    for task in tasks:
        by_pair.setdefault((task.tenant_id, task.model_name), []).append(task)
    claimed: list[Claimed] = []
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
        for item in claimed:
            semaphore.release(item.slot_key, token=item.slot_token)
        _unclaim(tasks, worker_id, counted, now)
        raise
    _unclaim(unslotted, worker_id, counted, now)
    return claimed


def _unclaim(tasks: list[AsynchTask], worker_id: str, counted: bool, claimed_at: dt.datetime) -> None:
    """Back to the queue, uncalled: their calls are taken back out of the statistics."""
    if not tasks:
        return
    transitions.release(task_ids=[task.id for task in tasks], worker_id=worker_id, now=timezone.now())
    if counted:
        groups = Counter((task.tenant_id, task.creator, task.model_name) for task in tasks)
        for (tenant_id, creator, model_name), count in groups.items():
            stat_count_call(tenant_id=tenant_id, creator=creator, model_name=model_name, now=claimed_at, calls=-count)


def _session() -> requests.Session:
    session = getattr(_local, "session", None)
    if session is None:
        session = _local.session = requests.Session()
    return session


def _query_params(payload: dict[str, Any]) -> dict[str, str]:
    """GET: the payload as query parameters; nested values travel as JSON text."""
    params = {}
    for key, value in payload.items():
        if isinstance(value, str):
            params[key] = value
        elif isinstance(value, bool):
            params[key] = "true" if value else "false"
        elif value is None:
            params[key] = ""
        elif isinstance(value, int | float):
            params[key] = str(value)
        else:
            params[key] = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return params


def _drop_broken_connection() -> None:
    # Call threads keep their connection for the drain (a check before every task
    # would cost a round trip each); after an error it is dropped if unusable, so the
    # next task reconnects. Never inside a transaction: tests run the queue in theirs.
    if not connection.in_atomic_block:
        close_old_connections()


def task_execute(claimed: Claimed) -> str:
    """Call the model for one claimed task and store what it answers. Returns the
    outcome: ``succeeded``, ``failed`` or ``lost`` (the attempt was taken away)."""
    task, call = claimed.task, claimed.call
    released = False

    def release_slot() -> None:
        nonlocal released
        if not released:
            released = True
            get_semaphore().release(claimed.slot_key, token=claimed.slot_token)

    try:
        with bound(taskId=task.id):
            return _execute(task, call, release_slot, claimed.counted)
    except Exception as error:  # a bug must not leave the task running until its lease lapses
        logger.exception("asynch: task %s failed unexpectedly", task.id)
        _drop_broken_connection()
        moved = transitions.fail(
            task_id=task.id,
            attempt_no=task.attempt_no,
            error_message=f"Internal error: {type(error).__name__}",
            http_status=None,
            now=timezone.now(),
        )
        return "failed" if moved else "lost"
    finally:
        release_slot()


def _execute(task: AsynchTask, call: ModelCall, release_slot: Callable[[], None], counted: bool) -> str:
    payload = task.request_payload if isinstance(task.request_payload, dict) else {}
    request: dict[str, Any] = {"headers": call.headers, "timeout": call.timeout_seconds}
    if call.http_method == "GET":
        request["params"] = _query_params(payload)
    else:
        request["json"] = payload
    # Seed 003 §1.3: real calls only, counted as they are sent (on PostgreSQL by the
    # claim itself), so a worker that dies mid-call has counted it too; storage
    # retries never count again.
    if not counted:
        stat_count_call(tenant_id=task.tenant_id, creator=task.creator, model_name=task.model_name)
    response: requests.Response | None = None
    error_message = ""
    outcome = "error"
    try:
        response = _session().request(call.http_method, call.url, **request)
        outcome = "ok" if response.status_code < 400 else "error"
    except requests.Timeout:
        error_message = f"The model service did not answer within {call.timeout_seconds}s"
        outcome = "timeout"
    except requests.RequestException as error:
        error_message = f"The model service could not be reached: {type(error).__name__}"
    finally:
        release_slot()  # the slot bounds model calls; storing the answer needs none
        ASYNCH_CALLS.inc(task.model_name, outcome)
    now = timezone.now()
    if response is None or response.status_code >= 400:
        if response is not None:
            error_message = f"The model service answered HTTP {response.status_code}: {_redacted(response.text, call)}"
        moved = transitions.fail(
            task_id=task.id,
            attempt_no=task.attempt_no,
            error_message=error_message,
            http_status=response.status_code if response is not None else None,
            now=now,
        )
        return "failed" if moved else "lost"
    result = ResultFile(
        task_id=task.id,
        tenant_id=task.tenant_id,
        content=response.content,
        content_type=response.headers.get("Content-Type", "application/octet-stream"),
    )
    try:
        ref = _store(result, task)
    except StorageError as error:
        moved = transitions.fail(
            task_id=task.id, attempt_no=task.attempt_no, error_message=str(error), http_status=200, now=now
        )
        return "failed" if moved else "lost"
    if transitions.succeed(
        task_id=task.id, attempt_no=task.attempt_no, oss_file=ref, http_status=response.status_code, now=timezone.now()
    ):
        return "succeeded"
    # The attempt was taken away (failed as stuck) while the call ran: its file goes.
    try:
        get_storage().delete(ref)
    except Exception:
        logger.warning("asynch: could not delete the orphan result %s", ref, exc_info=True)
    return "lost"


def _store(result: ResultFile, task: AsynchTask) -> str:
    """Store with a few quick attempts: an upload retry calls no model (seed 003 §1.3)."""
    forward = json.loads(crypto.decrypt(task.forward_headers_encrypted) or "{}")
    storage = get_storage()
    attempts = max(1, settings.ASYNCH_STORAGE_ATTEMPTS)
    for attempt in range(1, attempts + 1):
        try:
            return storage.save(result, forward_headers=forward)
        except StorageError:
            if attempt == attempts:
                raise
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


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
            flag_clear(KICK_KEY)  # from now on a new task wakes a drain again
            _drain(totals, budget)
        finally:
            _drain_lock.release()
    return totals


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


def _drain(totals: Counter[str], budget_seconds: float) -> None:
    me = worker_id()
    size = max(1, settings.ASYNCH_WORKER_CONCURRENCY)
    lease = settings.ASYNCH_LEASE_SECONDS
    beat_every = max(0.2, lease / 3)
    poll = max(0.05, settings.ASYNCH_WORKER_POLL_INTERVAL)
    deadline = time.monotonic() + budget_seconds
    inbox: queue.Queue[Claimed | None] = queue.Queue()
    outbox: queue.Queue[tuple[Claimed, str]] = queue.Queue()
    threads: list[threading.Thread] = []
    running: dict[str, Claimed] = {}
    last_beat = time.monotonic()
    woke_another = False
    calls: dict[str, ModelCall] = {}
    calls_read = float("-inf")
    out_of_time = False
    last_look = False
    saturated: set[tuple[str, str]] = set()
    saturated_at = time.monotonic()
    try:
        while True:
            free = size - len(running)
            claimed: list[Claimed] = []
            out_of_time = time.monotonic() >= deadline
            # Claim in batches: once half the threads are free (or none is busy), so
            # a busy drain makes one claim per few calls, not one per call.
            if free > 0 and (free >= (size + 1) // 2 or not running) and not out_of_time:
                if time.monotonic() - calls_read > poll:  # configs change rarely: read once per poll
                    calls, calls_read = _model_calls(), time.monotonic()
                if time.monotonic() - saturated_at > poll:  # a slot elsewhere may have freed up
                    saturated, saturated_at = set(), time.monotonic()
                claimed = tasks_claim(
                    calls=calls, limit=min(free, settings.ASYNCH_WORKER_BATCH_SIZE), worker_id=me, saturated=saturated
                )
                for item in claimed:
                    if len(threads) < size:
                        thread = threading.Thread(target=_call_thread, args=(inbox, outbox), daemon=True)
                        thread.start()
                        threads.append(thread)
                    running[item.task.id] = item
                    inbox.put(item)
                totals["claimed"] += len(claimed)
                if claimed and len(claimed) == free and not woke_another:
                    worker_kick()  # every thread is busy and more may wait: let another process join
                    woke_another = True
            if claimed:
                last_look = False
            if not running and saturated and not out_of_time:
                # Tasks wait whose (tenant, model) slots are all held elsewhere: poll
                # until one frees, so this process takes its share.
                time.sleep(poll)
                continue
            if not running:
                if last_look:
                    break
                # Looks empty. Clear the kick flag, then look once more: a task committed
                # before the clear is seen now, one committed after it sends a new kick.
                flag_clear(KICK_KEY)
                last_look = True
                continue
            try:
                item, outcome = outbox.get(timeout=poll if len(running) < size else beat_every)
                while True:  # collect every other call that finished meanwhile
                    running.pop(item.task.id, None)
                    saturated.discard((item.task.tenant_id, item.task.model_name))  # its slot is free now
                    totals[outcome] += 1
                    item, outcome = outbox.get_nowait()
            except queue.Empty:
                pass
            if time.monotonic() - last_beat >= beat_every and running:
                _renew(list(running.values()), me, lease)
                last_beat = time.monotonic()
    finally:
        for _ in threads:
            inbox.put(None)
        for thread in threads:
            thread.join()
    if out_of_time:
        worker_kick()


def _renew(items: list[Claimed], me: str, lease: float) -> None:
    renewed = get_semaphore().renew([(c.slot_key, c.slot_token) for c in items], lease_seconds=lease)
    for item, ok in zip(items, renewed, strict=True):
        if not ok:
            logger.warning("asynch: the slot of task %s lapsed while its call ran", item.task.id)
    now = timezone.now()
    transitions.extend_leases(
        task_ids=[c.task.id for c in items], worker_id=me, lease_until=now + dt.timedelta(seconds=lease), now=now
    )


def _redacted(text: str, call: ModelCall) -> str:
    """An error body is shown to the tenant: never with the configured header values
    (a service may echo the key it refused), nor with NUL characters."""
    text = text[:2000]
    for value in call.headers.values():
        if len(value) >= 4:
            text = text.replace(value, "****")
    return text.replace("\x00", "")[:500]
