"""The alert rules in a real Prometheus (Debian's) scraping a live gunicorn with
``METRICS_TOKEN``, every second, the rules' ``for:`` shortened to two seconds:
AiJobsBreakerOpen fires once ten platform-key jobs fail with a model code through
the internal API, and resolves when an operator closes the breaker in the admin;
AiJobsNoRuntimes fires once the only runtime stops while a job is pending, and
resolves when a runtime calls again."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import requests
from django.contrib.auth import get_user_model

from runtime_worker.runner import Runtime
from tests.support.factories import JobFactory
from tests.support.ops import Gunicorn, admin_session, gunicorn
from tests.support.prometheus import DOCS_URL, Prometheus, prometheus
from tests.support.runtime_fixtures import runtime_config, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

METRICS_TOKEN = "prometheus-scrape-token-0123456789"
RUNTIME_TOKEN = "ops-runtime-token-for-the-test-servers"  # the gunicorn fixture's RUNTIME_SERVICE_TOKENS
LEASE_SECONDS = 2  # a runtime is active while it called in the last 2 leases


@pytest.fixture
def stack(tmp_path: Path, settings) -> Iterator[tuple[Gunicorn, Prometheus]]:
    key = f"test:alerts:{uuid.uuid4().hex}"
    env = {
        "REDIS_URL": settings.REDIS_URL,
        "METRICS_REDIS_KEY": key,
        "METRICS_TOKEN": METRICS_TOKEN,
        "AI_JOB_LOCK_SECONDS": str(LEASE_SECONDS),
        "RUNTIME_SEEN_WRITE_SECONDS": "0",
    }
    try:
        with gunicorn(tmp_path / "gunicorn.log", workers=2, env=env) as server:
            assert server.get("/metrics").status_code == 401  # the token is needed, and Prometheus sends it
            with prometheus(tmp_path / "prometheus", target=server.url, token=METRICS_TOKEN) as prom:
                yield server, prom
    finally:
        redis.Redis.from_url(settings.REDIS_URL).delete(key)


def runtime_call(server: Gunicorn, path: str, body: dict, instance: str = "alerts-runtime") -> requests.Response:
    headers = {"Authorization": f"Bearer {RUNTIME_TOKEN}", "x-runtime-instance-id": instance}
    return requests.post(f"{server.url}/internal/runtime/{path}", json=body, headers=headers, timeout=10)


def test_the_breaker_opened_by_ten_model_failures_fires_and_closing_it_in_the_admin_resolves_it(stack, settings):
    server, prom = stack
    assert prom.alerts("AiJobsBreakerOpen") == []
    for job in [JobFactory(max_retry_count=0) for _ in range(10)]:  # platform-key jobs
        locked = runtime_call(server, f"jobs/{job.id}/lock", {})
        assert locked.status_code == 200, locked.text
        body = {"attemptNo": locked.json()["attemptNo"], "errorCode": "MODEL_TIMEOUT", "errorMessage": "no answer"}
        assert runtime_call(server, f"jobs/{job.id}/fail", body).json()["status"] == "failed"
    wait_for(lambda: prom.value('aijobs_breaker_state{state="open"}') == 1, timeout=30, every=0.2,
             what="Prometheus to see the breaker open")  # fmt: skip
    [alert] = wait_for(lambda: prom.firing("AiJobsBreakerOpen"), timeout=30, every=0.2, what="AiJobsBreakerOpen firing")
    assert alert["labels"]["state"] == "open" and alert["labels"]["severity"] == "critical"
    assert alert["annotations"]["runbook_url"] == f"{DOCS_URL}/operations/alerts/#aijobsbreakeropen"
    assert "has been open for more than a minute" in alert["annotations"]["description"]

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # one the server checks
    get_user_model().objects.create_superuser("operator", "op@example.com", "operator-password")
    admin = admin_session(server.url, "operator", "operator-password")
    closed = admin.post(
        f"{server.url}/admin/quotas/platformcircuitbreaker/",
        data={"to_state": "closed", "reason": "provider back", "csrfmiddlewaretoken": admin.cookies["csrftoken"]},
        headers={"Referer": f"{server.url}/admin/quotas/platformcircuitbreaker/"},
        timeout=10,
        allow_redirects=False,
    )
    assert closed.status_code == 302, closed.text[:500]
    wait_for(lambda: prom.alerts("AiJobsBreakerOpen") == [], timeout=30, every=0.2, what="AiJobsBreakerOpen resolved")
    assert prom.value('aijobs_breaker_state{state="closed"}') == 1


def test_jobs_pending_with_the_runtimes_stopped_fire_and_a_runtime_back_resolves_it(stack):
    server, prom = stack
    JobFactory(job_type="quiz_generation")  # pending: the runtime below does not take quizzes
    config = runtime_config(server.url, "alerts-runtime", token=RUNTIME_TOKEN, capabilities=["flashcard_generation"])
    runtime = Runtime(config)
    runtime.start()
    try:
        wait_for(lambda: prom.value("aijobs_runtimes_active") == 1, timeout=30, every=0.2,
                 what="Prometheus to see the runtime active")  # fmt: skip
        # Several evaluations past the shortened for: with the runtime polling, nothing fires.
        for _ in range(4):
            assert prom.alerts("AiJobsNoRuntimes") == []
            time.sleep(1)
    finally:
        runtime.stop(timeout=10)
    assert prom.value('sum(aijobs_queue_jobs{status="pending"})') == 1
    [alert] = wait_for(lambda: prom.firing("AiJobsNoRuntimes"), timeout=30, every=0.2, what="AiJobsNoRuntimes firing")
    assert alert["annotations"]["summary"] == "1 jobs pending and no runtime active"
    assert alert["annotations"]["runbook_url"] == f"{DOCS_URL}/operations/alerts/#aijobsnoruntimes"

    def back() -> bool:  # a runtime calling again (it is active for two leases after each call)
        claimed = runtime_call(server, "jobs/claim", {"capabilities": ["flashcard_generation"], "limit": 1})
        assert claimed.status_code == 200, claimed.text
        return prom.alerts("AiJobsNoRuntimes") == []

    wait_for(back, timeout=30, every=0.2, what="AiJobsNoRuntimes resolved")
