"""The cache's Redis backend (``config.cache``): Django's, with one client per connection
pool, shared by every thread and good in a forked process (gunicorn forks its workers)."""

from __future__ import annotations

import multiprocessing
import uuid

import pytest
from django.conf import settings
from django.core.cache import cache, caches

from config.cache import RedisCache
from tests.support.concurrency import run_together


@pytest.fixture
def redis_cache() -> RedisCache:
    if not settings.REDIS_URL:
        pytest.skip("REDIS_URL is not set")
    backend = caches["default"]
    assert isinstance(backend, RedisCache)  # what the settings make of REDIS_URL
    return backend


def test_every_cache_call_of_every_thread_uses_the_one_client_of_its_pool(redis_cache):
    first = redis_cache._cache.get_client(write=True)
    prefix = uuid.uuid4().hex

    def work(i: int) -> tuple[bool, int, int]:
        key = f"{prefix}:{i}"
        added = redis_cache.add(key, i, timeout=30)
        again = redis_cache.add(key, -1, timeout=30)  # NX: the first value stays
        return added and not again, redis_cache.get(key), id(redis_cache._cache.get_client(write=True))

    results = run_together(16, work)
    assert [(ok, value) for ok, value, _ in results] == [(True, i) for i in range(16)]
    assert {client for _, _, client in results} == {id(first)}
    redis_cache.delete_many([f"{prefix}:{i}" for i in range(16)])


def _in_child(key: str, queue: multiprocessing.Queue) -> None:
    cache.set(key, "from the child", timeout=30)
    queue.put(cache.get(key))


def test_a_forked_process_uses_the_cache_with_connections_of_its_own(redis_cache):
    key = f"fork:{uuid.uuid4().hex}"
    redis_cache.set(key, "from the parent", timeout=30)  # the parent's pool holds a connection now
    queue: multiprocessing.Queue = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(target=_in_child, args=(key, queue))
    child.start()
    child.join(30)
    assert child.exitcode == 0 and queue.get(timeout=5) == "from the child"
    assert redis_cache.get(key) == "from the child"  # and the parent's client still works
    redis_cache.delete(key)
