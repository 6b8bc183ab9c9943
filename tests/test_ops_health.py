"""``/healthz`` and ``/readyz``, against real services a test stops:
a private redis-server, and broker and database addresses where nothing listens.
``/readyz`` is computed at most once a second: a change shows within a few."""

from __future__ import annotations

import pytest
from django.test import Client

from ops import health
from tests.support.ops import PrivateRedis
from tests.support.runtime_fixtures import free_port, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _readiness_connections_closed():
    yield
    health.close(wait=True)  # the test database is dropped at the end: nothing may hold it


def _readyz_until(status: int):
    return wait_for(lambda: (r := Client().get("/readyz")).status_code == status and r, timeout=10, every=0.2)


def test_healthz_answers_ok_and_touches_nothing(settings, django_assert_num_queries):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    with django_assert_num_queries(0):
        response = Client().get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_checks_each_configured_service_and_names_the_one_that_fails(settings, tmp_path):
    redis_server = PrivateRedis(tmp_path).start()
    settings.REDIS_URL = redis_server.url
    settings.CELERY_BROKER_URL = redis_server.url
    settings.READINESS_TIMEOUT_SECONDS = 1.0
    try:
        ready = Client().get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"status": "ok", "checks": {"database": "ok", "redis": "ok", "broker": "ok"}}

        redis_server.stop()
        down = _readyz_until(503)
        assert down.json() == {
            "status": "unavailable",
            "checks": {"database": "ok", "redis": "unavailable", "broker": "unavailable"},
        }
        assert Client().get("/healthz").status_code == 200

        redis_server.start()  # back on the same port: ready again, nothing restarted
        _readyz_until(200)
    finally:
        redis_server.stop()


def test_readyz_names_an_unreachable_broker_and_hides_its_password(settings):
    settings.REDIS_URL = ""
    settings.CELERY_BROKER_URL = f"amqp://guest:very-secret-pw@127.0.0.1:{free_port()}//"
    settings.READINESS_TIMEOUT_SECONDS = 1.0
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": "ok", "broker": "unavailable"}
    assert "very-secret-pw" not in response.content.decode() and "guest" not in response.content.decode()


def test_readyz_names_an_unreachable_database(settings):
    settings.REDIS_URL = ""
    settings.CELERY_BROKER_URL = "memory://"
    from django.db import connections

    connection = connections["default"]
    saved = connection.settings_dict["PORT"]
    connection.settings_dict["PORT"] = str(free_port())
    connection.close()
    try:
        response = Client().get("/readyz")
    finally:
        connection.settings_dict["PORT"] = saved
        connection.close()
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": "unavailable", "broker": "ok"}
