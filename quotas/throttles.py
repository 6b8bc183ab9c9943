"""API throttles as fixed-window counters that every web process shares.

One atomic step per request: with ``REDIS_URL`` set, a pipelined ``INCR`` + ``EXPIRE NX``
in Redis; without it (the embedded default), one upsert ``... RETURNING count`` on a row
of the database (``quotas_throttle_window``), which all of gunicorn's workers share, so
the documented rate holds however many workers there are. The rate is read from
settings on each request (``"300/min"``).

A throttle fails open: while Redis (or, without Redis, the database) cannot be reached,
requests are counted in the process's memory (so each process holds the rate on its
own), with one warning a minute at most; never a 500 for a counter."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from functools import cache as cache_once

import redis
from django.conf import settings
from django.core.cache.backends.locmem import LocMemCache
from django.db import InterfaceError, OperationalError
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from accounts.usernames import username_key
from config import auth_failures, sql
from config.rates import count_in
from config.rates import parse_rate as parse_rate
from quotas import queries


def clock() -> float:
    return time.time()


logger = logging.getLogger(__name__)

WARN_EVERY_SECONDS = 60.0

# The counters while Redis is unreachable: this process's memory.
_fallback = LocMemCache("quotas-throttles-fallback", {"OPTIONS": {"MAX_ENTRIES": 100_000}})
_warning_lock = threading.Lock()
_warned_at: float | None = None


@cache_once
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, **settings.REDIS_CLIENT_OPTIONS)


def _redis() -> redis.Redis | None:
    """A client of its own for the counters when ``REDIS_URL`` is set: one pipelined
    INCR + EXPIRE NX per request, where the cache API would take three round trips."""
    return _client(settings.REDIS_URL) if settings.REDIS_URL else None


def _warn_unreachable(error: Exception, what: str = "Redis") -> None:
    global _warned_at
    now = clock()
    with _warning_lock:
        if _warned_at is not None and now - _warned_at < WARN_EVERY_SECONDS:
            return
        _warned_at = now
    logger.warning(
        "Throttle counters: %s unreachable (%s: %s); counting in this process until it is back "
        "(this warning at most once a minute)",
        what,
        type(error).__name__,
        error,
    )


def _count_in_database(key: str, ttl: int, now: float) -> int:
    """The window's count after this request, in one statement (PostgreSQL and SQLite
    alike). A window's first request also sweeps the windows that have ended, so the
    table holds only the current ones."""
    count = int(sql.fetch(queries.COUNT_THROTTLE_WINDOW, {"key": key, "expires_at": now + ttl})[0][0])
    if count == 1:
        sql.execute(queries.SWEEP_THROTTLE_WINDOWS, {"now": now})
    return count


def _count(key: str, ttl: int, now: float, *, also_check: str | None = None) -> tuple[int, bool | None]:
    """The window's count after this request; and, with ``also_check``, whether that key is
    set, read in the same round trip (None when it was not read: no Redis, or Redis down)."""
    client = _redis()
    if client is None:
        try:
            return _count_in_database(key, ttl, now), None
        except (OperationalError, InterfaceError) as error:
            _warn_unreachable(error, "the database")
            return count_in(_fallback, key, ttl), None
    try:
        pipe = client.pipeline(transaction=False)
        pipe.incr(key)
        pipe.expire(key, ttl, nx=True)
        if also_check is not None:
            pipe.exists(also_check)
        count, _, *found = pipe.execute()
        return int(count), bool(found[0]) if found else None
    except (redis.ConnectionError, redis.TimeoutError) as error:
        _warn_unreachable(error)
        return count_in(_fallback, key, ttl), None


def first_seen_in_database(key: str, ttl: int) -> float | None:
    """When ``key`` was first seen (epoch seconds) in the last ``ttl`` seconds, or None
    when this is the first time: one statement on the windows' table every web process
    shares. The embedded default's stand-in for the cache's atomic ``add`` (its cache is
    each process's own memory), as the throttles count there without Redis."""
    now = clock()
    rows = sql.fetch(queries.COUNT_THROTTLE_WINDOW, {"key": key, "expires_at": now + ttl})
    count, expires_at = int(rows[0][0]), float(rows[0][1])
    if count == 1:
        sql.execute(queries.SWEEP_THROTTLE_WINDOWS, {"now": now})
        return None
    if expires_at < now:  # an old sighting the sweep has not reached: this one starts afresh
        sql.execute(queries.FORGET_THROTTLE_WINDOW, {"key": key})
        return first_seen_in_database(key, ttl)
    return expires_at - ttl


def forget_in_database(key: str) -> None:
    sql.execute(queries.FORGET_THROTTLE_WINDOW, {"key": key})


class DatabaseWindows:
    """The windows' table as the failed-authentication counts' store without Redis
    (``config.auth_failures.share_counts_with``, called at start): each process's memory
    would let a guesser try as many times more as there are web processes."""

    def count(self, key: str, ttl: int) -> int:
        return _count_in_database(key, ttl, clock())

    def peek(self, key: str) -> int:
        rows = sql.fetch(queries.PEEK_THROTTLE_WINDOW, {"key": key})
        return int(rows[0][0]) if rows else 0


class FixedWindowThrottle(BaseThrottle):
    scope = ""
    rate_setting = ""
    # Whether this throttle also refuses an address blocked for guessing credentials
    # (``config.auth_failures``), reading the block in its own round trip: an
    # authentication that leaves that check to it (a right runtime token) costs no more.
    refuses_guessing_addresses = False

    def ident(self, request: Request) -> str | None:
        raise NotImplementedError

    def ident_for(self, request: Request, view: APIView) -> str | None:
        return self.ident(request)

    def allow_request(self, request: Request, view: APIView) -> bool:
        ident = self.ident_for(request, view)
        if ident is None:
            return True
        limit, period = parse_rate(getattr(settings, self.rate_setting))
        now = clock()
        window = int(now // period)
        key = f"throttle:{self.scope}:{hashlib.sha256(ident.encode()).hexdigest()[:32]}:{window}"
        block_key, block_ends = auth_failures.block_key(request) if self.refuses_guessing_addresses else ("", 0.0)
        count, blocked = _count(key, period + 1, now, also_check=block_key or None)
        self._wait = (window + 1) * period - now
        if self.refuses_guessing_addresses:
            held = auth_failures.blocked(request) if blocked is None else auth_failures.blocked_by(blocked, block_ends)
            if held is not None:  # the right credential too, from an address that guessed
                self._wait = held
                return False
        return count <= limit

    def wait(self) -> float:
        return self._wait


class RuntimeThrottle(FixedWindowThrottle):
    """``RUNTIME_THROTTLE_RATE`` per runtime instance on ``/internal/runtime/*``; and the
    address block of ``AUTH_FAILURE_THROTTLE_RATE``, which ``RuntimeAuthentication``
    leaves to it for a right token."""

    scope = "runtime"
    rate_setting = "RUNTIME_THROTTLE_RATE"
    refuses_guessing_addresses = True

    def ident(self, request: Request) -> str | None:
        return request.headers.get("x-runtime-instance-id") or f"token:{request.auth}"


class UserThrottle(FixedWindowThrottle):
    """``USER_THROTTLE_RATE`` per user on ``/ai/*``."""

    scope = "user"
    rate_setting = "USER_THROTTLE_RATE"

    def ident(self, request: Request) -> str | None:
        user = request.user
        return f"user:{user.pk}" if user is not None and user.is_authenticated else None


class CredentialTestThrottle(FixedWindowThrottle):
    """``CREDENTIAL_TEST_THROTTLE_RATE`` per user on ``POST /ai/model-credentials/{id}/test``:
    each test calls the provider with the user's key, so it is no oracle to try keys with."""

    scope = "credential-test"
    rate_setting = "CREDENTIAL_TEST_THROTTLE_RATE"

    def ident(self, request: Request) -> str | None:
        user = request.user
        return f"user:{user.pk}" if user is not None and user.is_authenticated else None


class AuthIpThrottle(FixedWindowThrottle):
    """``AUTH_ADDRESS_THROTTLE_RATE`` per client IP on ``/auth/*``, whatever the
    username: ``REMOTE_ADDR``, or the address ``NUM_PROXIES`` trusted proxies put in
    ``X-Forwarded-For``."""

    scope = "auth-ip"
    rate_setting = "AUTH_ADDRESS_THROTTLE_RATE"

    def ident(self, request: Request) -> str | None:
        return self.get_ident(request) or None


class AuthUsernameThrottle(FixedWindowThrottle):
    """``AUTH_THROTTLE_RATE`` per pair of username and client IP on ``/auth/*``: what
    one address tries against one account. Never per username alone, so a guesser's
    failures from one address never refuse the account's owner at another: nobody can
    lock a learner out. The username the view finds in the request
    (``throttle_username``) counts by its key, the one registration and login compare
    (``accounts.usernames``: ``" alice"``, ``"ALICE"`` and ``"\\uff21LICE"``, with a
    fullwidth A, share one count); a call that names its user otherwise (a refresh
    token, the access token) by that user's public id (``throttle_user``)."""

    scope = "auth-user"
    rate_setting = "AUTH_THROTTLE_RATE"

    def ident_for(self, request: Request, view: APIView) -> str | None:
        address = self.get_ident(request) or ""
        name = getattr(view, "throttle_username", lambda _request: None)(request)
        if name:
            return f"user:{username_key(name)}|{address}"
        user = getattr(view, "throttle_user", lambda _request: None)(request)
        # Apart from usernames: a name spelled like someone's public id is not them.
        return f"id:{user}|{address}" if user else None


class RegistrationIpThrottle(AuthIpThrottle):
    """``REGISTRATION_THROTTLE_RATE`` per client IP on ``/auth/register``, besides
    ``AUTH_ADDRESS_THROTTLE_RATE``: accounts are what quotas are counted by, so the number one
    address can make is bounded."""

    scope = "register-ip"
    rate_setting = "REGISTRATION_THROTTLE_RATE"
