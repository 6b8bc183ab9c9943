"""Readiness: one check per backing service that is configured, each
bounded by ``READINESS_TIMEOUT_SECONDS``. The answer is ``"ok"`` or ``"unavailable"``
per service and nothing more: what failed (a host, an address, a user, the error) goes
to the log, which redacts it.

Probes come often and from many places, so the answer is computed at most once a
second per process (callers that come while it is being computed wait for it and share
it), and each check keeps one connection per process, opened on first use on a thread
of its own (a Django database connection belongs to the thread that opened it) and
replaced when it fails, instead of a new connection on every call. A kept connection
that fails is replaced and the check tried once more on the new one: a connection the
server dropped while it sat idle says nothing about the service."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from django.conf import settings
from django.db import connections

from config.observability.logging import Throttled
from config.sql import fetch
from ops import queries

logger = logging.getLogger(__name__)

FRESH_SECONDS = 1.0
OK, UNAVAILABLE = "ok", "unavailable"
_failures = Throttled(logger, every=30.0)  # a service that stays down: a line every so often, not per probe


class _Check:
    """One service's check: its thread, the connection it keeps there, the run in flight."""

    def __init__(self, name: str, run: Callable[[_Check], None]) -> None:
        self.name = name
        self.run = run
        self.client: Any = None  # the kept connection of a Redis or broker check
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"readyz-{name}")
        self.in_flight: Future[None] | None = None

    def submit(self) -> Future[None]:
        # A check that hangs past its timeout is waited for again, never queued behind.
        if self.in_flight is None or self.in_flight.done():
            self.in_flight = self.executor.submit(self.run, self)
        return self.in_flight

    def close(self) -> Future[None]:
        closed = self.executor.submit(_close, self)  # on its thread: the connection is that thread's
        self.executor.shutdown(wait=False)
        return closed


def _close(check: _Check) -> None:
    with contextlib.suppress(Exception):
        if check.name == "database":
            connections["default"].close()
        elif check.client is not None:
            check.client.close()
    check.client = None


def _twice(reused: bool, attempt: Callable[[], object], drop: Callable[[], None]) -> None:
    try:
        attempt()
        return
    except Exception:
        with contextlib.suppress(Exception):
            drop()
        if not reused:
            raise
    try:
        attempt()
    except Exception:
        with contextlib.suppress(Exception):
            drop()
        raise


def check_database(check: _Check) -> None:
    connection = connections["default"]
    connection.close_if_unusable_or_obsolete()  # past CONN_MAX_AGE, or left broken by an error

    _twice(connection.connection is not None, lambda: fetch(queries.DATABASE_ANSWERS), connection.close)


def check_redis(check: _Check) -> None:
    import redis

    reused = check.client is not None
    if check.client is None:
        timeout = settings.READINESS_TIMEOUT_SECONDS
        check.client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=timeout, socket_connect_timeout=timeout)
    client = check.client
    _twice(reused, client.ping, client.connection_pool.disconnect)


def check_broker(check: _Check) -> None:
    url = settings.CELERY_BROKER_URL
    if url.startswith("filesystem://"):
        folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"]
        if not os.access(folder, os.W_OK):
            raise OSError(f"the broker folder {folder} is not writable")
        return
    if url.startswith("memory://"):
        return
    reused = check.client is not None

    def round_trip() -> None:
        if check.client is None:
            check.client = _broker_connection(url)
        connection = check.client
        connection.ensure_connection(max_retries=0)
        if connection.transport.driver_type == "amqp":
            connection.connection.channel().close()  # Channel.Open and Close: answered by a live broker
        elif connection.transport.driver_type == "redis":
            connection.default_channel.client.ping()

    def drop() -> None:
        client, check.client = check.client, None
        if client is not None:
            client.close()

    _twice(reused, round_trip, drop)


def _broker_connection(url: str) -> Any:
    from kombu import Connection

    timeout = settings.READINESS_TIMEOUT_SECONDS
    if url.startswith(("amqp", "pyamqp")):
        options = {"read_timeout": timeout, "write_timeout": timeout}
    else:
        options = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    return Connection(url, connect_timeout=timeout, transport_options=options, heartbeat=0)


def configured_checks() -> dict[str, Callable[[_Check], None]]:
    checks: dict[str, Callable[[_Check], None]] = {"database": check_database}
    if settings.REDIS_URL:
        checks["redis"] = check_redis
    if settings.CELERY_BROKER_URL:
        checks["broker"] = check_broker
    return checks


# --- the answer, once a second -------------------------------------------------------------

_lock = threading.Lock()
_checks: dict[str, _Check] = {}
_checks_for: tuple[Any, ...] | None = None
_answer: tuple[tuple[Any, ...], float, dict[str, str]] | None = None  # (configuration, when, checks)


def _configuration() -> tuple[Any, ...]:
    """What the checks connect to: a change (a test's settings) means new connections."""
    database = connections["default"].settings_dict
    return (
        database.get("ENGINE"),
        database.get("HOST"),
        database.get("PORT"),
        database.get("NAME"),
        database.get("USER"),
        settings.REDIS_URL,
        settings.CELERY_BROKER_URL,
        settings.READINESS_TIMEOUT_SECONDS,
    )


def _fresh(configuration: tuple[Any, ...]) -> dict[str, str] | None:
    answer = _answer
    if answer is not None and answer[0] == configuration and time.monotonic() - answer[1] < FRESH_SECONDS:
        return answer[2]
    return None


def readiness_checks() -> dict[str, str]:
    """``{"database": "ok", "redis": "unavailable", ...}``; the checks run side by
    side, so a service that hangs costs the timeout once, not per check."""
    global _answer
    configuration = _configuration()
    shared = _fresh(configuration)
    if shared is not None:
        return shared
    with _lock:
        shared = _fresh(configuration)  # computed while this caller waited for the lock
        if shared is not None:
            return shared
        checks = _compute(configuration)
        _answer = (configuration, time.monotonic(), checks)
        return checks


def _compute(configuration: tuple[Any, ...]) -> dict[str, str]:
    global _checks_for
    if configuration != _checks_for:
        close()
        _checks.update({name: _Check(name, run) for name, run in configured_checks().items()})
        _checks_for = configuration
    timeout = settings.READINESS_TIMEOUT_SECONDS
    futures = {name: check.submit() for name, check in _checks.items()}
    deadline = time.monotonic() + timeout + 0.5
    results = {}
    for name, future in futures.items():
        try:
            future.result(timeout=max(0.0, deadline - time.monotonic()))
            results[name] = OK
        except FutureTimeout:
            _failures.warning(name, "readiness: the %s (%s) gave no answer within %gs", name, _target(name), timeout)
            results[name] = UNAVAILABLE
        except Exception as error:
            _failures.warning(
                name, "readiness: the %s (%s) is unavailable: %s: %s", name, _target(name), type(error).__name__, error
            )
            results[name] = UNAVAILABLE
    return results


def _target(name: str) -> str:
    """Where the check went, for the log line (whose formatter masks a URL's password)."""
    if name == "database":
        database = connections["default"].settings_dict
        return f"{database.get('HOST') or 'local'}:{database.get('PORT') or '-'}/{database.get('NAME')}"
    return settings.REDIS_URL if name == "redis" else settings.CELERY_BROKER_URL


def close(*, wait: bool = False) -> None:
    """Close every kept connection (the configuration changed; ``wait``: a test is done
    and its database is about to be dropped)."""
    global _checks_for, _answer
    closed = [check.close() for check in _checks.values()]
    if wait:
        for future in closed:
            with contextlib.suppress(Exception):
                future.result(timeout=settings.READINESS_TIMEOUT_SECONDS + 1)
    _checks.clear()
    _checks_for = None
    _answer = None
