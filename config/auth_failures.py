"""Guessing tokens and keys (contract section 10): a wrong runtime token on the internal
API, or a wrong ``X-Api-Key`` on model-asynch, counts against the client address
(``REMOTE_ADDR``, or the one ``NUM_PROXIES`` trusted proxies report) in a fixed window
of ``AUTH_FAILURE_THROTTLE_RATE``; past it, that address gets ``429 RATE_LIMITED`` until
the window ends, the right credential included. Only a credential that is sent and
wrong counts: a request without one is the caller's to fix, not a guess.

Both APIs' authentication classes use it; it sits in ``config`` because model-asynch
imports nothing of the other apps. With ``REDIS_URL`` the counts and the blocks are
every process's (one ``GET`` for a request that carries a credential, an ``INCR`` for a
wrong one; never a database statement). Without it (the embedded default) they are
counted in the database every web process shares, on the windows the throttles count
in: ``quotas`` hands those in at start (``share_counts_with``), since ``config`` imports
no app; the window's count past the limit is the block. While Redis (or, without it,
the database) cannot be reached, each process counts in its own memory. On the
internal runtime API, the read of a right token's address block rides in the
throttle's own round trip to Redis (``quotas.throttles``, ``block_key``/``blocked_by``),
so a runtime's request pays for no round trip of its own."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from functools import cache
from typing import Protocol

import redis
from django.conf import settings
from django.core.cache.backends.locmem import LocMemCache
from django.db import InterfaceError, OperationalError
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from config.rates import count_in, parse_rate

logger = logging.getLogger(__name__)

_memory = LocMemCache("config-auth-failures", {"OPTIONS": {"MAX_ENTRIES": 100_000}})
_warned = threading.Event()


class SharedWindows(Protocol):
    """Fixed-window counts every web process shares, without Redis."""

    def count(self, key: str, ttl: int) -> int:
        """The window's count after one more."""
        ...

    def peek(self, key: str) -> int:
        """The window's count now (0 when nothing was counted in it)."""
        ...


_shared: SharedWindows | None = None


def share_counts_with(windows: SharedWindows | None) -> None:
    """Count in ``windows`` when there is no Redis (``quotas`` hands in its database's at start)."""
    global _shared
    _shared = windows


def _rate() -> tuple[int, int]:
    return parse_rate(str(settings.AUTH_FAILURE_THROTTLE_RATE))


@cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, **settings.REDIS_CLIENT_OPTIONS)


def _address(request: Request) -> str:
    return BaseThrottle().get_ident(request) or ""


def _keys(address: str, now: float) -> tuple[str, str, int]:
    _, period = _rate()
    window = int(now // period)
    digest = hashlib.sha256(address.encode()).hexdigest()[:32]
    return f"auth-failures:{digest}:{window}", f"auth-blocked:{digest}:{window}", (window + 1) * period


def _unreachable(error: Exception) -> None:
    if not _warned.is_set():
        _warned.set()
        what = "Redis" if settings.REDIS_URL else "the database"
        logger.warning("Failed-authentication counts: %s unreachable (%s); counting in this process", what, error)


def block_key(request: Request) -> tuple[str, float]:
    """The key that marks this request's address blocked now, and when its window ends:
    for a caller that reads it in a round trip of its own (then ``blocked_by``)."""
    _, key, ends = _keys(_address(request), time.time())
    return key, ends


def blocked_by(found: object, ends: float) -> float | None:
    """``blocked``'s answer from the block key's value, read by the caller."""
    return max(1.0, ends - time.time()) if found else None


def blocked(request: Request) -> float | None:
    """Seconds until this request's address may try again, or None when it may now."""
    count_key, key, ends = _keys(_address(request), time.time())
    found = None
    if settings.REDIS_URL:
        try:
            found = _client(settings.REDIS_URL).get(key)
        except (redis.ConnectionError, redis.TimeoutError) as error:
            _unreachable(error)
            found = _memory.get(key)
    elif _shared is not None:
        try:
            found = _shared.peek(count_key) > _rate()[0]
        except (OperationalError, InterfaceError) as error:
            _unreachable(error)
            found = _memory.get(key)
    else:
        found = _memory.get(key)
    return blocked_by(found, ends)


def _count_in_memory(count_key: str, key_of_block: str, ttl: int, limit: int) -> int:
    count = count_in(_memory, count_key, ttl)
    if count > limit:
        _memory.set(key_of_block, 1, timeout=ttl)
    return count


def failed(request: Request) -> None:
    """Count a wrong credential from this request's address; raises ``Throttled`` (429)
    when it is one past the limit, and marks the address blocked for the window."""
    now = time.time()
    limit, period = _rate()
    count_key, key_of_block, ends = _keys(_address(request), now)
    ttl = period + 1
    if settings.REDIS_URL:
        try:
            client = _client(settings.REDIS_URL)
            pipe = client.pipeline(transaction=False)
            pipe.incr(count_key)
            pipe.expire(count_key, ttl, nx=True)
            count = int(pipe.execute()[0])
            if count > limit:
                client.set(key_of_block, 1, ex=ttl)
        except (redis.ConnectionError, redis.TimeoutError) as error:
            _unreachable(error)
            count = _count_in_memory(count_key, key_of_block, ttl, limit)
    elif _shared is not None:
        try:
            count = _shared.count(count_key, ttl)  # past the limit, the count itself is the block
        except (OperationalError, InterfaceError) as error:
            _unreachable(error)
            count = _count_in_memory(count_key, key_of_block, ttl, limit)
    else:
        count = _count_in_memory(count_key, key_of_block, ttl, limit)
    if count > limit:
        raise exceptions.Throttled(wait=max(1.0, ends - now))


def refuse_if_blocked(request: Request) -> None:
    wait = blocked(request)
    if wait is not None:
        raise exceptions.Throttled(wait=wait)
