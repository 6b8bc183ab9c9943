"""API throttles: fixed windows counted atomically in the shared cache (Redis in make test)."""

from __future__ import annotations

import logging
from collections import Counter

import pytest
from django.conf import settings as django_settings

from quotas import throttles
from quotas.throttles import parse_rate
from tests.support import fault_fixtures
from tests.support.api import ALL_TYPES, RuntimeClient, error_code
from tests.support.concurrency import run_together

pytestmark = pytest.mark.django_db

private_redis = fault_fixtures.private_redis


def test_parse_rate_reads_the_settings_notation():
    assert parse_rate("300/min") == (300, 60)
    assert parse_rate("60/minute") == (60, 60)
    assert parse_rate("10/s") == (10, 1)


def test_the_runtime_over_its_rate_gets_429_rate_limited_with_retry_after(settings, monkeypatch):
    settings.RUNTIME_THROTTLE_RATE = "3/min"
    monkeypatch.setattr("quotas.throttles.clock", lambda: 1_800_000_030.0)
    runtime, other = RuntimeClient("busy-runtime"), RuntimeClient("quiet-runtime")
    statuses = [runtime.post("jobs/poll", {"capabilities": ALL_TYPES}).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    limited = runtime.post("jobs/poll", {"capabilities": ALL_TYPES})
    assert error_code(limited) == "RATE_LIMITED" and limited.json()["error"]["retryable"] is True
    assert limited["Retry-After"] == "30"
    # The limit is per runtime instance.
    assert other.post("jobs/poll", {"capabilities": ALL_TYPES}).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_at_the_edge_never_pass_more_than_the_rate(settings, monkeypatch):
    settings.RUNTIME_THROTTLE_RATE = "10/min"
    monkeypatch.setattr("quotas.throttles.clock", lambda: 1_800_000_030.0)  # mid-window: no boundary to cross
    assert (throttles._redis() is not None) == bool(django_settings.REDIS_URL)  # shared counters when Redis is there

    def poll(i: int) -> int:
        return RuntimeClient("edge-runtime").post("jobs/poll", {"capabilities": ALL_TYPES}).status_code

    assert Counter(run_together(25, poll)) == {200: 10, 429: 15}


def test_a_user_over_the_rate_on_ai_endpoints_gets_429_and_others_do_not(settings, monkeypatch):
    from tests.support.user_api import Learner

    settings.USER_THROTTLE_RATE = "4/min"
    monkeypatch.setattr("quotas.throttles.clock", lambda: 1_800_000_010.0)
    busy, quiet = Learner(), Learner()
    statuses = [
        busy.get(path).status_code for path in ("/ai/profile", "/ai/jobs", "/ai/settings", "/ai/jobs", "/ai/jobs")
    ]
    assert statuses == [200, 200, 200, 200, 429]
    limited = busy.job()
    assert error_code(limited) == "RATE_LIMITED" and limited["Retry-After"] == "50"
    assert quiet.get("/ai/jobs").status_code == 200


def test_throttles_fail_open_while_redis_is_down_counting_in_the_process_and_warning_once_a_minute(
    settings, monkeypatch, private_redis, caplog
):
    settings.REDIS_URL = private_redis.url()
    settings.RUNTIME_THROTTLE_RATE = "3/min"
    now = [1_800_000_010.0]
    monkeypatch.setattr("quotas.throttles.clock", lambda: now[0])
    monkeypatch.setattr("quotas.throttles._warned_at", None)
    monkeypatch.setattr("quotas.throttles._fallback", throttles.LocMemCache("test-fallback", {}))
    runtime = RuntimeClient("redis-less-runtime")

    def poll() -> int:
        return runtime.post("jobs/poll", {"capabilities": ALL_TYPES}).status_code

    assert [poll(), poll()] == [200, 200]  # counted in Redis
    private_redis.kill()
    with caplog.at_level(logging.WARNING, logger="quotas.throttles"):
        # Redis is gone: the requests go through, counted in this process, which holds the rate itself.
        assert [poll() for _ in range(5)] == [200, 200, 200, 429, 429]
        warnings = [r for r in caplog.records if r.name == "quotas.throttles"]
        assert len(warnings) == 1 and "Redis unreachable" in warnings[0].getMessage()
        now[0] += 61  # a minute later (a new window): one more warning, no more
        assert [poll() for _ in range(3)] == [200, 200, 200]
        assert len([r for r in caplog.records if r.name == "quotas.throttles"]) == 2
    private_redis.start()  # back (empty, as after a crash): counting is shared again at once
    assert [poll() for _ in range(4)] == [200, 200, 200, 429]
    assert throttles._redis().exists(*throttles._redis().keys("throttle:runtime:*")) == 1
