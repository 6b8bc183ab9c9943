"""API throttles (seed 002 §2.3) as fixed-window counters in the cache.

One atomic ``incr`` per request: with ``REDIS_URL`` set the cache is Redis, so every
web process shares the same counters; on the embedded default it is the process's
own memory. The rate is read from settings on each request (``"300/min"``)."""

from __future__ import annotations

import hashlib
import time
from functools import cache as cache_once

import redis
from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

_PERIODS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
}


def parse_rate(rate: str) -> tuple[int, int]:
    """``"300/min"`` → (300, 60)."""
    count, _, period = rate.partition("/")
    return int(count), _PERIODS[period.strip().lower()]


def clock() -> float:
    return time.time()


@cache_once
def _redis() -> redis.Redis | None:
    """A client of its own for the counters when ``REDIS_URL`` is set: one pipelined
    INCR + EXPIRE NX per request, where the cache API would take three round trips."""
    return redis.Redis.from_url(settings.REDIS_URL) if settings.REDIS_URL else None


def _count(key: str, ttl: int) -> int:
    client = _redis()
    if client is not None:
        pipe = client.pipeline(transaction=False)
        pipe.incr(key)
        pipe.expire(key, ttl, nx=True)
        count, _ = pipe.execute()
        return int(count)
    cache.add(key, 0, timeout=ttl)
    try:
        return cache.incr(key)
    except ValueError:  # the window's key expired between add and incr
        cache.add(key, 1, timeout=ttl)
        return 1


class FixedWindowThrottle(BaseThrottle):
    scope = ""
    rate_setting = ""

    def ident(self, request: Request) -> str | None:
        raise NotImplementedError

    def allow_request(self, request: Request, view: APIView) -> bool:
        ident = self.ident(request)
        if ident is None:
            return True
        limit, period = parse_rate(getattr(settings, self.rate_setting))
        now = clock()
        window = int(now // period)
        key = f"throttle:{self.scope}:{hashlib.sha256(ident.encode()).hexdigest()[:32]}:{window}"
        count = _count(key, period + 1)
        self._wait = (window + 1) * period - now
        return count <= limit

    def wait(self) -> float:
        return self._wait


class RuntimeThrottle(FixedWindowThrottle):
    """``RUNTIME_THROTTLE_RATE`` per runtime instance on ``/internal/runtime/*``."""

    scope = "runtime"
    rate_setting = "RUNTIME_THROTTLE_RATE"

    def ident(self, request: Request) -> str | None:
        return request.headers.get("x-runtime-instance-id") or f"token:{request.auth}"


class UserThrottle(FixedWindowThrottle):
    """``USER_THROTTLE_RATE`` per user on ``/ai/*``."""

    scope = "user"
    rate_setting = "USER_THROTTLE_RATE"

    def ident(self, request: Request) -> str | None:
        user = request.user
        return f"user:{user.pk}" if user is not None and user.is_authenticated else None
