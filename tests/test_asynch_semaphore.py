"""The semaphore that bounds a tenant's calls to a model: Redis (the production setup) and
the file-backed one of the embedded default, each against the same rules: at most ``limit``
holders, a slot back on release or when its holder stops renewing, atomic under contention."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.asynch_fixtures import FileSemaphore, RedisSemaphore

# The embedded default runs the file semaphore (no Redis there).
pytestmark = [pytest.mark.embedded]


@pytest.fixture(params=["redis", "file"])
def semaphore(request, settings, tmp_path):
    if request.param == "file":
        return FileSemaphore(tmp_path / "sem.json")
    if not settings.REDIS_URL:
        pytest.skip("REDIS_URL is not set")
    return RedisSemaphore(settings.REDIS_URL)


def test_the_semaphore_admits_limit_holders_and_frees_a_slot_on_release(semaphore):
    key = f"asynch:sem:test:{time.time_ns()}"
    assert [semaphore.acquire(key, limit=2, token=t, lease_seconds=30) for t in "abc"] == [True, True, False]
    assert semaphore.acquire(key, limit=2, token="a", lease_seconds=30)  # a holder re-acquiring renews
    assert semaphore.holders(key) == 2
    semaphore.release(key, token="a")
    assert semaphore.acquire(key, limit=2, token="c", lease_seconds=30)


def test_a_slot_whose_holder_stopped_renewing_comes_back_after_its_lease(semaphore):
    key = f"asynch:sem:test:{time.time_ns()}"
    assert semaphore.acquire(key, limit=1, token="dead", lease_seconds=0.3)
    assert semaphore.acquire(key, limit=1, token="alive", lease_seconds=0.3) is False
    assert semaphore.renew([(key, "dead")], lease_seconds=0.3) == [True]
    time.sleep(0.4)
    assert semaphore.renew([(key, "dead")], lease_seconds=0.3) == [False]
    assert semaphore.acquire(key, limit=1, token="alive", lease_seconds=30)


def test_the_semaphore_is_atomic_under_concurrent_acquires(semaphore):
    key = f"asynch:sem:test:{time.time_ns()}"
    won: list[str] = []
    start = threading.Barrier(16)

    def contend(token: str) -> None:
        start.wait()
        if semaphore.acquire(key, limit=3, token=token, lease_seconds=30):
            won.append(token)

    threads = [threading.Thread(target=contend, args=(f"t{i}",)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 3 and semaphore.holders(key) == 3
