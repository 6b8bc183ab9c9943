"""Celery worker processes are observed as the web is: their counters reach ``/metrics`` (one
Redis hash for every process), their lines are JSON in ``LOG_FORMAT=json``, and a
task's lines carry the id of the request that queued it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client

from config.observability import context
from tests.support.asynch_fixtures import make_model, model_server_fixture, tenant_client  # noqa: F401
from tests.support.celery_workers import Workers, kick, needs_postgres_and_redis  # noqa: F401  (fixture)
from tests.support.ops import Scrape
from tests.support.runtime_fixtures import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.mark.usefixtures("needs_postgres_and_redis")
def test_worker_processes_count_model_calls_for_every_web_process_and_log_json(tmp_path: Path, model_server):
    model_server.behaviour = lambda call, i: (200, {"n": call.json["n"]}, 0.0)
    make_model("echo", base_url=model_server.url, max_concurrency=4)
    acme = tenant_client("acme")
    workers = Workers(tmp_path)
    try:
        for name in ("w1", "w2"):
            workers.start(name, LOG_FORMAT="json", LOG_LEVEL="INFO", METRICS_FLUSH_SECONDS="0.2")
        workers.wait_ready()
        for n in range(20):
            acme.create_task("echo", {"n": n})
        token = context.open_context(requestId="req-celery-1")
        try:
            kick(2)
        finally:
            context.close_context(token)

        def counted() -> bool:
            scrape = Scrape.parse(Client().get("/metrics").content.decode())
            return scrape.value("asynch_model_calls_total", model_name="echo", outcome="ok") == 20

        wait_for(counted, timeout=30, what="the workers' 20 calls in /metrics")
        records = [json.loads(line) for name in ("w1", "w2") for line in _lines(tmp_path / f"{name}.log")]
        assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
        ran = [r for r in records if r.get("requestId") == "req-celery-1"]
        assert ran and all("asynch.tasks.work" in r["message"] for r in ran), ran
    finally:
        workers.stop()


def _lines(path: Path) -> list[str]:
    """The log's lines, less Celery's start-up banner (printed, not logged)."""
    return [line for line in path.read_text().splitlines() if line.startswith("{")]
