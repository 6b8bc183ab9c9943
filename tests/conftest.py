from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.conf import LazySettings
from django.core.cache import cache

from ai_jobs import pauses
from config.observability import metrics
from ops import health
from quotas import selectors as quota_selectors
from tests.support import parallel
from tests.support.api import RUNTIME_TOKEN, RuntimeClient
from tests.support.factories import UserFactory

# The suite's model services are local stand-ins on 127.0.0.1: listed, as make run lists
# its own, for this process and every server and worker a test starts (tests/security/
# proves the refusal without it).
MODEL_HOSTS = "127.0.0.1"
os.environ["ASYNCH_ALLOWED_MODEL_HOSTS"] = MODEL_HOSTS


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Under xdist, a test marked ``serial`` runs while no other does (tests/support/parallel.py)."""
    with parallel.slot(alone=item.get_closest_marker("serial") is not None):
        return (yield)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile`` (make test's) hands out the longest files first (tests/support/parallel.py)."""
    return parallel.SlowFilesFirst(config, log) if config.getoption("dist") == "loadfile" else None


@pytest.fixture(autouse=True)
def _runtime_settings(settings: LazySettings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.RUNTIME_SERVICE_TOKENS = [RUNTIME_TOKEN, "test-runtime-token-next-0123456789abcdef"]
    settings.PLATFORM_DEEPSEEK_API_KEY = "sk-platform-test-key"
    settings.RUNTIME_THROTTLE_RATE = "100000/min"
    settings.USER_THROTTLE_RATE = "100000/min"
    settings.AUTH_THROTTLE_RATE = "100000/min"
    settings.AUTH_ADDRESS_THROTTLE_RATE = "100000/min"
    settings.AUTH_FAILURE_THROTTLE_RATE = "100000/min"
    settings.CREDENTIAL_TEST_THROTTLE_RATE = "100000/min"
    settings.ASYNCH_ALLOWED_MODEL_HOSTS = MODEL_HOSTS.split(",")
    # The counts an earlier test's requests left in this process's buffer go to Redis before
    # the clear, not into this test's scrape (the flush waits for a background flush under way).
    metrics.flush()
    cache.clear()
    quota_selectors.breaker_state_forget()  # a test's breaker is the database's, not a hint read by an earlier test
    pauses.forget()  # likewise the paused job types


@pytest.fixture
def runtime() -> RuntimeClient:
    return RuntimeClient("runtime-1")


@pytest.fixture
def other_runtime() -> RuntimeClient:
    return RuntimeClient("runtime-2")


@pytest.fixture
def user(db):
    return UserFactory()


@pytest.fixture
def other_user(db):
    return UserFactory()


@pytest.fixture(scope="session", autouse=True)
def _readiness_connections_closed_at_the_end(django_db_setup: None) -> Iterator[None]:
    """``/readyz`` keeps a database connection on a thread of its own in each process
    (ops/health.py): a test that asked for it in this process leaves one open, and the
    test database is dropped after this closes it, not while it is held."""
    yield
    health.close(wait=True)
