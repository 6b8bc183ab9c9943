"""API throttles: fixed windows counted atomically in the shared cache (Redis in make test)."""

from __future__ import annotations

import logging
from collections import Counter

import pytest
from django.conf import settings as django_settings
from django.urls import get_resolver

from ai_jobs.api.authentication import RuntimeAuthentication
from quotas import throttles
from quotas.throttles import parse_rate
from tests.support import fault_fixtures
from tests.support.api import ALL_TYPES, RUNTIME_TOKEN, RuntimeClient, error_code
from tests.support.concurrency import run_together
from tests.support.factories import JobFactory

pytestmark = pytest.mark.django_db

private_redis = fault_fixtures.private_redis


def test_parse_rate_reads_the_settings_notation():
    assert parse_rate("300/min") == (300, 60)
    assert parse_rate("60/minute") == (60, 60)
    assert parse_rate("10/s") == (10, 1)
    for unreadable in ("300", "300/fortnight", "0/min", "-1/min", "x/min", ""):
        with pytest.raises(ValueError, match="is not a rate"):
            parse_rate(unreadable)


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


@pytest.mark.embedded
def test_a_right_runtime_token_from_an_address_that_guessed_is_refused_on_every_internal_call(settings):
    """The address block of AUTH_FAILURE_THROTTLE_RATE holds for the right token too, on
    every call of the internal API (the runtime throttle reads it in its own round trip to
    Redis; without Redis, from the database every web process shares), and for that
    address only."""
    settings.AUTH_FAILURE_THROTTLE_RATE = "3/min"
    job = JobFactory()
    claimed = RuntimeClient("held-runtime").claim(limit=1).json()["jobs"][0]
    assert claimed["jobId"] == job.id

    def from_address(address: str, token: str = RUNTIME_TOKEN) -> RuntimeClient:
        client = RuntimeClient("held-runtime", token=token)
        client.client.defaults["REMOTE_ADDR"] = address
        return client

    guesser = from_address("203.0.113.7", token="wrong-" + "x" * 40)
    assert [guesser.post("jobs/poll", {"capabilities": ALL_TYPES}).status_code for _ in range(4)] == [401] * 3 + [429]
    held = from_address("203.0.113.7")
    refused = [
        held.post("jobs/poll", {"capabilities": ALL_TYPES}),
        held.claim(limit=1),
        held.heartbeat(job.id),
        held.get(f"jobs/{job.id}/snapshot"),
        held.result(job.id, claimed["attemptNo"], {"summary": "x"}),
    ]
    assert [(error_code(answer), answer.status_code) for answer in refused] == [("RATE_LIMITED", 429)] * 5
    assert all(1 <= int(answer["Retry-After"]) <= 61 for answer in refused)
    # Another address, the same token and instance: served.
    assert from_address("198.51.100.7").heartbeat(job.id).status_code == 200


def test_every_view_that_takes_a_runtime_token_refuses_a_guessing_address_in_its_throttle():
    """RuntimeAuthentication leaves the address block to the view's throttle: a view with
    the one and not the other would let a guesser's right token through."""

    def views(patterns, prefix=""):
        for pattern in patterns:
            if hasattr(pattern, "url_patterns"):
                yield from views(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern), getattr(pattern.callback, "view_class", None)

    runtime_views = [
        (path, view)
        for path, view in views(get_resolver().url_patterns)
        if view is not None and RuntimeAuthentication in getattr(view, "authentication_classes", ())
    ]
    assert len(runtime_views) >= 9  # the internal API's nine views were found
    for path, view in runtime_views:
        assert any(getattr(throttle, "refuses_guessing_addresses", False) for throttle in view.throttle_classes), path
