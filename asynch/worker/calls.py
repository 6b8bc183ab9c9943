"""Calling one model service for one claimed task, and storing what it answers.
The payload is sent as JSON (GET: as query parameters), with the config's headers
and ``timeoutSeconds``; the semaphore slot is released as soon as the answer is in.
Every request is read and every connection checked against the ``baseUrl`` rules
(``config.outbound``, under ``ASYNCH_ALLOWED_MODEL_HOSTS``) as it is opened, and redirects are never followed: a ``3xx`` is a failed call, so the key headers
go to the configured host and nowhere else.

An answer is read as a stream, at most ``ASYNCH_MAX_ANSWER_BYTES`` of it (decoded): a
larger one is a failed call and is not stored, so a worker's memory never grows with
what a model sends. The call's whole time (connect, send, every read) is bounded by the
config's ``timeoutSeconds``, not each read: a model that drips its answer byte by byte
is cut off at the deadline.

An answer in hand is never thrown away for our own bookkeeping (DESIGN rule 8): a slot
that cannot be released (Redis down) lapses with its lease, and storing the answer
and the task's outcome is retried while the database or Redis is unreachable, so the
model is never called twice for one task because a dependency blinked."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone
from urllib3 import Timeout
from urllib3.exceptions import HTTPError
from urllib3.exceptions import TimeoutError as Urllib3Timeout

from asynch import crypto, selectors, transitions
from asynch.headers import parse_api_key
from asynch.models import AsynchModel, AsynchTask
from asynch.semaphore import get_semaphore
from asynch.services import MODEL_HOSTS, model_api_key, stat_count_call
from asynch.storage import ResultFile, StorageError, get_storage
from config import outbound
from config.errors import OUTAGE_ERRORS
from config.observability.context import bound
from config.observability.logging import Throttled
from config.observability.metrics import ASYNCH_CALLS

logger = logging.getLogger(__name__)
_warn = Throttled(logger)

_local = threading.local()
T = TypeVar("T")


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
    answered: bool = False  # the model's answer is kept from an earlier attempt: only store it


def model_calls() -> dict[str, ModelCall]:
    """What calling each enabled model takes, read from the configs; a config whose
    ``apiKey`` cannot be decrypted is left out, so its tasks wait."""
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


def _session() -> requests.Session:
    session = getattr(_local, "session", None)
    if session is None:
        session = _local.session = outbound.session(MODEL_HOSTS)
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


def _settled(what: str, task: AsynchTask, step: Callable[[], T]) -> T:
    """Run a step that must happen once the model has answered (store the answer,
    record the outcome), again and again while the database or Redis cannot be
    reached: the drain keeps the task's lease meanwhile, and the step's own
    conditional transition says whether the attempt is still ours. Gives up only
    past ``ASYNCH_TASK_TIMEOUT_SECONDS``, when the cleaner fails the task anyway."""
    give_up = time.monotonic() + settings.ASYNCH_TASK_TIMEOUT_SECONDS
    pause = 0.1
    while True:
        try:
            return step()
        except OUTAGE_ERRORS as error:
            if time.monotonic() + pause > give_up:
                raise
            _warn.warning(
                "settle",
                "asynch: %s of task %s waits for the database or Redis (%s: %s); retrying",
                what, task.id, type(error).__name__, error,
            )  # fmt: skip
            _drop_broken_connection()
            time.sleep(pause)
            pause = min(2.0, pause * 2)


def task_execute(claimed: Claimed) -> str:
    """Call the model for one claimed task and store what it answers. Returns the
    outcome: ``succeeded``, ``failed`` or ``lost`` (the attempt was taken away)."""
    task, call = claimed.task, claimed.call
    released = False

    def release_slot() -> None:
        nonlocal released
        if released:
            return
        released = True
        if not claimed.slot_token:  # a kept answer's retry holds no slot
            return
        try:
            get_semaphore().release(claimed.slot_key, token=claimed.slot_token)
        except Exception as error:  # Redis down: the slot lapses with its lease, and counts until then
            _warn.warning(
                "release",
                "asynch: a slot was not released (%s: %s); it lapses with its lease",
                type(error).__name__, error,
            )  # fmt: skip

    try:
        with bound(taskId=task.id):
            if claimed.answered:
                return _store_kept_answer(task)
            return _execute(task, call, release_slot, claimed.counted)
    except OUTAGE_ERRORS as error:
        # Before the call (its count on SQLite): nothing was called, the lease lapses
        # and the cleaner queues the task again.
        _warn.warning("before", "asynch: task %s not called (%s: %s)", task.id, type(error).__name__, error)
        _drop_broken_connection()
        return "lost"
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
    # The statistics count real calls only, counted as they are sent (on PostgreSQL by the
    # claim itself), so a worker that dies mid-call has counted it too; storage
    # retries never count again.
    if not counted:
        stat_count_call(tenant_id=task.tenant_id, creator=task.creator, model_name=task.model_name)
    response: requests.Response | None = None
    answer = b""
    error_message = ""
    outcome = "error"
    deadline = time.monotonic() + call.timeout_seconds
    # urllib3's total bounds the connect, the send and the answer's head together.
    request["timeout"] = Timeout(total=call.timeout_seconds)
    try:
        response = _session().request(call.http_method, call.url, allow_redirects=False, stream=True, **request)
        limit = settings.ASYNCH_MAX_ANSWER_BYTES if response.status_code < 300 else ERROR_BODY_BYTES
        answer = _read_bounded(response, limit, deadline)
        outcome = "ok" if response.status_code < 300 else "error"
    except AnswerTooLarge as too_large:
        error_message = str(too_large)
        outcome = "too_large"
    except outbound.OutboundRefused as error:
        # Nothing was sent: the call is taken back from the statistics (real calls only).
        logger.warning(
            "asynch: task %s not sent to model %s at %s: %s",
            task.id,
            task.model_name,
            urlsplit(call.url).hostname,
            error,
        )
        error_message = f"The model service was not called: {error}"
        outcome = ""
        stat_count_call(tenant_id=task.tenant_id, creator=task.creator, model_name=task.model_name, calls=-1)
    except (requests.Timeout, AnswerLate, Urllib3Timeout, TimeoutError):
        error_message = f"The model service did not answer within {call.timeout_seconds}s"
        outcome = "timeout"
    except (requests.RequestException, OSError, HTTPError) as error:
        error_message = f"The model service could not be reached: {type(error).__name__}"
    finally:
        if response is not None:
            response.close()  # an answer not read to its end is not left on the connection
        release_slot()  # the slot bounds model calls; storing the answer needs none
        if outcome:
            ASYNCH_CALLS.inc(task.model_name, "error" if outcome == "too_large" else outcome)
    # From here on the model has answered: every step is settled, never given up for an outage.
    now = timezone.now()
    failed = partial(transitions.fail, task_id=task.id, attempt_no=task.attempt_no, now=now)
    if response is None or response.status_code >= 300 or outcome != "ok":
        if outcome in ("too_large", "timeout") or response is None:
            pass  # the message says it
        elif response.status_code < 400:
            error_message = f"The model service answered HTTP {response.status_code}, a redirect (never followed)"
        else:
            text = answer.decode(response.encoding or "utf-8", errors="replace")
            error_message = f"The model service answered HTTP {response.status_code}: {_redacted(text, call)}"
        status = response.status_code if response is not None else None
        moved = _settled("the failure", task, partial(failed, error_message=error_message, http_status=status))
        return "failed" if moved else "lost"
    result = ResultFile(
        task_id=task.id,
        tenant_id=task.tenant_id,
        content=answer,
        content_type=response.headers.get("Content-Type", "application/octet-stream"),
    )
    # Kept until its file is stored: an upload that fails is retried, across cleaner
    # runs, without a new call.
    keep = partial(
        transitions.keep_answer,
        task_id=task.id,
        attempt_no=task.attempt_no,
        content=result.content,
        content_type=result.content_type,
        http_status=response.status_code,
        now=now,
    )
    _settled("keeping the answer", task, keep)
    return _store_answer(task, result, response.status_code)


# What of an error answer is read: its start is all the tenant is shown.
ERROR_BODY_BYTES = 4096
_CHUNK = 64 * 1024


class AnswerTooLarge(Exception):
    pass


class AnswerLate(Exception):
    pass


def _read_bounded(response: requests.Response, limit: int, deadline: float) -> bytes:
    """The answer's body, decoded, read in chunks while it stays within ``limit``
    bytes (an error answer: its first ``limit`` bytes) and the call's deadline. Each
    read waits no longer than what is left of the call's time."""
    declared = response.headers.get("Content-Length", "")
    too_large = AnswerTooLarge(
        f"The model service's answer was too large: more than ASYNCH_MAX_ANSWER_BYTES ({limit} bytes); not stored"
    )
    keep_start = response.status_code >= 300
    if not keep_start and declared.isdigit() and int(declared) > limit:
        raise too_large
    body = bytearray()
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)

    def wait_no_longer_than_the_call() -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AnswerLate
        if sock is not None:
            sock.settimeout(left)

    while True:
        wait_no_longer_than_the_call()
        # read1: what one read of the socket brings, so a drip cannot hold a read open.
        chunk = response.raw.read1(_CHUNK, decode_content=True)
        if not chunk:
            return bytes(body)
        body += chunk
        if len(body) > limit:
            if keep_start:
                return bytes(body[:limit])
            raise too_large


def _store_kept_answer(task: AsynchTask) -> str:
    """A retry of a task whose model answered but whose file was not stored: the kept
    answer is stored, and the model is not called again (nor counted)."""
    kept = _settled("reading the kept answer", task, partial(transitions.kept_answer, task_id=task.id))
    if kept is None:  # deleted meanwhile (the task is gone or succeeded): nothing to do
        return "lost"
    result = ResultFile(
        task_id=task.id, tenant_id=task.tenant_id, content=bytes(kept.content), content_type=kept.content_type
    )
    return _store_answer(task, result, kept.http_status)


def _store_answer(task: AsynchTask, result: ResultFile, http_status: int) -> str:
    failed = partial(transitions.fail, task_id=task.id, attempt_no=task.attempt_no, now=timezone.now())
    try:
        ref = _settled("storing the answer", task, partial(_store, result, task))
    except StorageError as error:
        moved = _settled("the failure", task, partial(failed, error_message=str(error), http_status=http_status))
        return "failed" if moved else "lost"
    succeeded = partial(
        transitions.succeed, task_id=task.id, attempt_no=task.attempt_no, oss_file=ref, http_status=http_status
    )
    committed = partial(selectors.task_succeeded_with, task_id=task.id, attempt_no=task.attempt_no, oss_file=ref)
    if _settled("the success", task, lambda: succeeded(now=timezone.now())) or _settled("the success", task, committed):
        return "succeeded"
    # The attempt was taken away (failed as stuck) while the call ran: its file goes.
    try:
        get_storage().delete(ref)
    except Exception:
        logger.warning("asynch: could not delete the orphan result %s", ref, exc_info=True)
    return "lost"


def _store(result: ResultFile, task: AsynchTask) -> str:
    """Store with a few quick attempts: an upload retry calls no model."""
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


def _redacted(text: str, call: ModelCall) -> str:
    """An error body is shown to the tenant: never with the configured header values
    (a service may echo the key it refused), nor with NUL characters."""
    text = text[:2000]
    for value in call.headers.values():
        if len(value) >= 4:
            text = text.replace(value, "****")
    return text.replace("\x00", "")[:500]
