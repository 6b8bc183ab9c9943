"""``/readyz`` against gunicorn: a flood of probes costs the backing
services at most one check per process a second, on connections each process keeps
(counted where they land: a private redis-server, PostgreSQL's sessions), and a
service that fails is ``"unavailable"`` in the answer, its address, user and error in
the log only."""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis
import requests
from django.db import connection

from tests.support.ops import PrivateRedis, gunicorn
from tests.support.runtime_fixtures import free_port, wait_for
from tests.support.security.input import log_lines

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
WORKERS = 2
CHECKS_ON_REDIS = 2  # the redis check and the broker's (the broker is the same redis-server)


def _redis_counts(client: redis.Redis) -> tuple[int, int]:
    """Connections the server has accepted, and PINGs it has answered, since it started."""
    stats = client.info("stats")["total_connections_received"]
    pings = client.info("commandstats").get("cmdstat_ping", {}).get("calls", 0)
    return stats, pings


def _pg_sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def _flood(url: str, count: int = 50) -> list[requests.Response]:
    with ThreadPoolExecutor(count) as pool:  # each call on a new connection: any worker may answer
        return list(pool.map(lambda _: requests.get(url + "/readyz", timeout=30), range(count)))


def test_fifty_probes_at_once_cost_one_check_per_process_a_second_on_kept_connections(tmp_path: Path):
    if connection.vendor != "postgresql":
        pytest.skip("counts PostgreSQL's sessions")
    private = PrivateRedis(tmp_path).start()
    counter = redis.Redis.from_url(private.url)
    env = {
        "REDIS_URL": private.url,
        "CELERY_BROKER_URL": private.url.rsplit("/", 1)[0] + "/1",
        "READINESS_TIMEOUT_SECONDS": "2",
    }
    try:
        with gunicorn(tmp_path / "gunicorn.log", workers=WORKERS, env=env) as server:
            for _ in range(3):  # every worker opens its connections once
                assert {r.status_code for r in _flood(server.url, 20)} == {200}
                time.sleep(1.1)
            connections_before, pings_before = _redis_counts(counter)
            sessions_before = _pg_sessions()
            started = time.monotonic()
            answers = _flood(server.url)
            elapsed = time.monotonic() - started
            time.sleep(1.0)  # a backend that closed has reported its session by now
            connections_after, pings_after = _redis_counts(counter)
            sessions_after = _pg_sessions()
    finally:
        private.stop()
    assert {r.status_code for r in answers} == {200}
    assert {r.json()["status"] for r in answers} == {"ok"}
    windows = math.ceil(elapsed) + 1  # the one-second windows the flood touched
    assert pings_after - pings_before <= WORKERS * CHECKS_ON_REDIS * windows, (pings_before, pings_after)
    assert connections_after - connections_before == 0  # the kept connections, none new
    assert sessions_after - sessions_before == 0


def test_a_failing_service_is_unavailable_and_the_answer_names_no_host_port_user_or_error(tmp_path: Path):
    private = PrivateRedis(tmp_path).start()
    broker_port = free_port()
    env = {
        "LOG_FORMAT": "json",
        "REDIS_URL": private.url,
        "CELERY_BROKER_URL": f"amqp://probe-user:probe-secret-pw@127.0.0.1:{broker_port}//",
        "READINESS_TIMEOUT_SECONDS": "1",
    }
    try:
        with gunicorn(tmp_path / "gunicorn.log", workers=1, env=env) as server:
            first = server.get("/readyz")
            assert first.status_code == 503
            assert first.json() == {
                "status": "unavailable",
                "checks": {"database": "ok", "redis": "ok", "broker": "unavailable"},
            }
            private.stop()
            wait_for(lambda: server.get("/readyz").json()["checks"]["redis"] == "unavailable", timeout=10, every=0.3)
            down = server.get("/readyz")
            assert down.json()["checks"] == {"database": "ok", "redis": "unavailable", "broker": "unavailable"}
            for answer in (first, down):
                text = answer.text
                for told in ("127.0.0.1", str(private.port), str(broker_port), "probe-user", "probe-secret-pw",
                             "Error", "refused", "timeout"):  # fmt: skip
                    assert told not in text, (told, text)
            lines = wait_for(
                lambda: (
                    (found := [x for x in log_lines(server) if "readiness: the" in x]) and len(found) >= 2 and found
                ),
                timeout=10,
            )
    finally:
        private.stop()
    assert any("broker" in line and f"127.0.0.1:{broker_port}" in line for line in lines), lines
    assert any("redis" in line and f"127.0.0.1:{private.port}" in line for line in lines), lines
    assert all("probe-secret-pw" not in line for line in log_lines(server))  # the log redacts the password
