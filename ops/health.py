"""Readiness (contract §8): one check per backing service that is configured, each
bounded by ``READINESS_TIMEOUT_SECONDS``; a failure is named with its error, never
with a URL's password."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from django.conf import settings
from django.db import connections

from config.observability.redact import redact

_pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="readyz")


def check_database() -> None:
    connection = connections["default"]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        connection.close()  # the check's thread is not a request's: give its connection back


def check_redis() -> None:
    import redis

    timeout = settings.READINESS_TIMEOUT_SECONDS
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        client.ping()
    finally:
        client.close()


def check_broker() -> None:
    url = settings.CELERY_BROKER_URL
    if url.startswith("filesystem://"):
        folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"]
        if not os.access(folder, os.W_OK):
            raise OSError(f"the broker folder {folder} is not writable")
        return
    if url.startswith("memory://"):
        return
    from kombu import Connection

    with Connection(url, connect_timeout=settings.READINESS_TIMEOUT_SECONDS) as connection:
        connection.ensure_connection(max_retries=0)


def configured_checks() -> dict[str, Callable[[], None]]:
    checks: dict[str, Callable[[], None]] = {"database": check_database}
    if settings.REDIS_URL:
        checks["redis"] = check_redis
    if settings.CELERY_BROKER_URL:
        checks["broker"] = check_broker
    return checks


def _describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip().splitlines()[0] if str(error) else type(error).__name__
    return redact(text)[:300]


def readiness_checks() -> dict[str, str]:
    """``{"database": "ok", "redis": "ConnectionError: ...", ...}``; the checks run
    side by side, so a service that hangs costs the timeout once, not per check."""
    timeout = settings.READINESS_TIMEOUT_SECONDS
    futures = {name: _pool.submit(check) for name, check in configured_checks().items()}
    results = {}
    for name, future in futures.items():
        try:
            future.result(timeout=timeout + 0.5)
            results[name] = "ok"
        except FutureTimeout:
            results[name] = f"no answer within {timeout:g}s"
        except Exception as error:
            results[name] = _describe(error)
    return results
