"""``/healthz`` and ``/readyz`` (contract §8), against real services a test stops:
a private redis-server, and broker and database addresses where nothing listens."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.ops_support import PrivateRedis
from tests.runtime_fixtures import free_port

pytestmark = pytest.mark.django_db(transaction=True)


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
        down = Client().get("/readyz")
        assert down.status_code == 503
        body = down.json()
        assert body["status"] == "unavailable" and body["checks"]["database"] == "ok"
        assert body["checks"]["redis"] != "ok" and "Connection" in body["checks"]["redis"]
        assert body["checks"]["broker"] != "ok"
        assert Client().get("/healthz").status_code == 200

        redis_server.start()  # back on the same port: ready again, nothing restarted
        assert Client().get("/readyz").status_code == 200
    finally:
        redis_server.stop()


def test_readyz_names_an_unreachable_broker_and_hides_its_password(settings):
    settings.REDIS_URL = ""
    settings.CELERY_BROKER_URL = f"amqp://guest:very-secret-pw@127.0.0.1:{free_port()}//"
    settings.READINESS_TIMEOUT_SECONDS = 1.0
    response = Client().get("/readyz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert set(checks) == {"database", "broker"} and checks["database"] == "ok" and checks["broker"] != "ok"
    assert "very-secret-pw" not in response.content.decode()


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
    assert response.json()["checks"]["database"] != "ok" and response.json()["checks"]["broker"] == "ok"
