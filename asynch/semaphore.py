"""The distributed semaphore that caps calls per (tenant, model) at ``maxConcurrency``.

A semaphore is a Redis sorted set: one member per held slot (the holder's token),
scored by the moment its lease ends. Acquiring drops lapsed members and adds ours
only while fewer than ``limit`` remain, in one Lua script, so it is atomic across
any number of processes and machines; the time is Redis's own (``TIME``), so the
machines' clocks do not matter. A holder renews its lease while its call runs; a
holder that dies stops renewing, and its slot is free once the lease ends.

Without ``REDIS_URL`` (the embedded default) the same algorithm runs over a JSON
file under an exclusive ``flock``: correct for every process of one machine.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from django.conf import settings

# Several tokens of one key at once: as many as fit, in order; returns how many.
_ACQUIRE_MANY = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local got = 0
for i = 3, #ARGV do
  if redis.call('ZCARD', KEYS[1]) >= limit then break end
  redis.call('ZADD', KEYS[1], now + lease, ARGV[i])
  got = got + 1
end
if got > 0 then redis.call('PEXPIRE', KEYS[1], lease * 2) end
return got
"""

_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) > now then
  redis.call('ZADD', KEYS[1], 'XX', now + lease, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], lease * 2)
  return 1
end
return 0
"""


_HOLDERS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZCARD', KEYS[1])
"""


def semaphore_key(tenant_id: str, model_name: str) -> str:
    return f"asynch:sem:{tenant_id}:{model_name}"


class Semaphore(Protocol):
    def acquire_many(self, key: str, *, limit: int, tokens: list[str], lease_seconds: float) -> int: ...

    def renew(self, slots: Iterable[tuple[str, str]], *, lease_seconds: float) -> list[bool]: ...

    def release(self, key: str, *, token: str) -> None: ...

    def holders(self, key: str) -> int: ...


class RedisSemaphore:
    def __init__(self, url: str) -> None:
        import redis

        # Bounded waits: a Redis that does not answer fails the claim in seconds
        # (no slot, no call), never hangs a drain.
        self.client = redis.Redis.from_url(url, **settings.REDIS_CLIENT_OPTIONS)
        self._renew = self.client.register_script(_RENEW)
        self._acquire_many = self.client.register_script(_ACQUIRE_MANY)
        self._holders = self.client.register_script(_HOLDERS)

    def acquire_many(self, key: str, *, limit: int, tokens: list[str], lease_seconds: float) -> int:
        """The first tokens that fit get a slot; returns how many did."""
        if not tokens:
            return 0
        return int(self._acquire_many(keys=[key], args=[limit, int(lease_seconds * 1000), *tokens]))

    def renew(self, slots: Iterable[tuple[str, str]], *, lease_seconds: float) -> list[bool]:
        slots = list(slots)
        if not slots:
            return []
        pipe = self.client.pipeline(transaction=False)
        for key, token in slots:
            self._renew(keys=[key], args=[token, int(lease_seconds * 1000)], client=pipe)
        return [bool(result) for result in pipe.execute()]

    def release(self, key: str, *, token: str) -> None:
        self.client.zrem(key, token)

    def holders(self, key: str) -> int:
        return int(self._holders(keys=[key]))


class FileSemaphore:
    """One machine, any number of processes: every operation holds an exclusive
    ``flock`` on the state file, so check-and-add is atomic here too."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._thread_lock = threading.Lock()

    def _update(self, change):  # type: ignore[no-untyped-def]
        with self._thread_lock, open(self.path, "a+", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                handle.seek(0)
                text = handle.read()
                state: dict[str, dict[str, float]] = json.loads(text) if text.strip() else {}
                now = time.time()
                for key in list(state):
                    state[key] = {token: until for token, until in state[key].items() if until > now}
                    if not state[key]:
                        del state[key]
                result = change(state, now)
                handle.seek(0)
                handle.truncate()
                handle.write(json.dumps(state))
                handle.flush()
                os.fsync(handle.fileno())
                return result
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def acquire_many(self, key: str, *, limit: int, tokens: list[str], lease_seconds: float) -> int:
        def change(state: dict[str, dict[str, float]], now: float) -> int:
            held = state.setdefault(key, {})
            got = 0
            for token in tokens:
                if len(held) >= limit:
                    break
                held[token] = now + lease_seconds
                got += 1
            if not held:
                del state[key]
            return got

        return self._update(change) if tokens else 0

    def renew(self, slots: Iterable[tuple[str, str]], *, lease_seconds: float) -> list[bool]:
        slots = list(slots)

        def change(state: dict[str, dict[str, float]], now: float) -> list[bool]:
            renewed = []
            for key, token in slots:
                held = state.get(key, {})
                if token in held:
                    held[token] = now + lease_seconds
                renewed.append(token in held)
            return renewed

        return self._update(change) if slots else []

    def release(self, key: str, *, token: str) -> None:
        def change(state: dict[str, dict[str, float]], now: float) -> None:
            held = state.get(key, {})
            held.pop(token, None)
            if not held:
                state.pop(key, None)

        self._update(change)

    def holders(self, key: str) -> int:
        return self._update(lambda state, now: len(state.get(key, {})))


@lru_cache(maxsize=4)
def _semaphore(redis_url: str, path: str) -> Semaphore:
    return RedisSemaphore(redis_url) if redis_url else FileSemaphore(Path(path))


def get_semaphore() -> Semaphore:
    redis_url = settings.ASYNCH_SEMAPHORE_REDIS_URL
    return _semaphore(redis_url, str(settings.VAR_DIR / "asynch-semaphore.json"))


# --- the wake-up flag ------------------------------------------------------------------------
# "A drain has been asked for": set by createTask's kick, cleared by the drain. On the
# semaphore's Redis (one client, no per-call setup) or, embedded, the Django cache.


def flag_set(key: str, *, ttl_seconds: int) -> bool:
    """Set the flag unless it is set; True when this call set it."""
    semaphore = get_semaphore()
    if isinstance(semaphore, RedisSemaphore):
        return bool(semaphore.client.set(key, 1, nx=True, ex=ttl_seconds))
    from django.core.cache import cache

    return bool(cache.add(key, 1, timeout=ttl_seconds))


def flag_clear(key: str) -> None:
    semaphore = get_semaphore()
    if isinstance(semaphore, RedisSemaphore):
        semaphore.client.delete(key)
        return
    from django.core.cache import cache

    cache.delete(key)
