"""The cache's Redis backend: Django's own, with one ``redis.Redis`` client per connection
pool instead of a new one for every cache call.

Django's ``RedisCacheClient.get_client`` builds a ``redis.Redis`` around the pool on each
operation, and redis-py's constructor is not cheap (it sets up its command and response
tables every time): ``bench.profile_requests`` showed it as most of the CPU of a claim's one
cache call. A client holds no connection of its own (each command borrows one from the pool,
which also starts afresh in a forked process), so one per pool serves every thread."""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class _PooledClients(RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}
        self._lock = threading.Lock()

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            with self._lock:
                client = self._clients.setdefault(id(pool), self._client(connection_pool=pool))
        return client


class RedisCache(DjangoRedisCache):
    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _PooledClients
