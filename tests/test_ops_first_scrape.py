"""Every metric of the table (docs/operations/metrics.md) is in the first scrape of a fresh platform,
a family without labels as one sample, a labelled family with a 0 sample for each
label value known in advance (each status, job type and API; model names once
configured). An alert on a counter's rate sees nothing until its series exists, so
a counter that appears only with its first event loses that event to the alert.
Checked from outside, on gunicorn as production runs it, for both counter stores."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest
import redis

from ai_jobs import job_types
from tests.support.asynch_fixtures import make_model
from tests.support.ops import DOCUMENTED_METRICS, Gunicorn, Scrape, gunicorn
from tests.support.runtime_fixtures import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

APIS = ("internal", "user", "asynch", "auth", "admin", "other")
FINAL_STATUSES = ("succeeded", "failed", "cancelled")
API_KEY_MODES = ("platform_key", "user_deepseek_key")
OUTCOMES = ("ok", "error", "timeout")
# Beside the documented table, what the alert rules divide or compare by.
ALERTED = {
    "aijobs_queue_pending_due_jobs": ("gauge", {"job_type"}),
    "aijobs_platform_token_budget": ("gauge", set()),
    "aijobs_platform_cost_budget_cents": ("gauge", set()),
    "aijobs_job_lock_seconds": ("gauge", set()),
    "asynch_model_queue_limit": ("gauge", {"model_name"}),
}


@pytest.fixture(params=["redis", "multiprocess-files"])
def fresh(request: pytest.FixtureRequest, tmp_path: Path, settings) -> Gunicorn:
    """A server whose counters start empty: a Redis hash of its own, or a new directory."""
    key = f"test:first-scrape:{uuid.uuid4().hex}"
    if request.param == "redis":
        env = {"REDIS_URL": settings.REDIS_URL, "METRICS_REDIS_KEY": key}
    else:
        env = {"REDIS_URL": "<unset>", "METRICS_REDIS_URL": "<unset>", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "mp")}
    try:
        with gunicorn(tmp_path / "gunicorn.log", workers=2, env=env) as server:
            yield server
    finally:
        if request.param == "redis":
            redis.Redis.from_url(settings.REDIS_URL).delete(key)


def scrape(server: Gunicorn) -> Scrape:
    response = server.get("/metrics")
    assert response.status_code == 200, response.text[:300]
    return Scrape.parse(response.text)


def series(found: Scrape, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of ``name`` by their labels; a label set given twice fails (Prometheus refuses such a scrape)."""
    keys = [tuple(sorted(labels.items())) for sample, labels, _ in found.samples if sample == name]
    doubled = [key for key, n in Counter(keys).items() if n > 1]
    assert not doubled, (name, doubled)
    return {tuple(sorted(labels.items())): value for sample, labels, value in found.samples if sample == name}


def has(found: Scrape, name: str, **labels: str) -> bool:
    return tuple(sorted(labels.items())) in series(found, name)


def test_every_family_is_in_the_first_scrape_with_a_zero_for_each_known_label_value(fresh: Gunicorn):
    found = scrape(fresh)
    for name, (kind, labels) in {**DOCUMENTED_METRICS, **ALERTED}.items():
        assert found.types.get(name) == kind, (name, found.types.get(name))
        if "model_name" not in labels:  # no model is configured yet: those families are declared, empty
            assert found.labels[name] == labels, (name, found.labels[name])
    types = job_types.names()
    for status in FINAL_STATUSES:
        for job_type in types:
            code = "JOB_CANCELLED" if status == "cancelled" else ""
            labels = {"status": status, "job_type": job_type, "error_code": code}
            assert series(found, "aijobs_jobs_finished_total")[tuple(sorted(labels.items()))] == 0
    assert series(found, "aijobs_job_type_paused") == {(("job_type", job_type),): 0 for job_type in types}
    for mode in API_KEY_MODES:
        assert has(found, "aijobs_model_tokens_total", api_key_mode=mode)
    assert series(found, "aijobs_notifications_failed_total") == {(): 0}
    for platform in ("ios", "android"):
        for outcome in ("delivered", "retried", "device_disabled", "failed", "dropped"):
            assert series(found, "aijobs_pushes_total")[(("outcome", outcome), ("platform", platform))] == 0
    for api in APIS:
        for status in ("200", "500", "503"):
            assert has(found, "aijobs_http_requests_total", api=api, status=status), (api, status)
        assert has(found, "aijobs_http_request_duration_seconds_bucket", api=api, le="+Inf")
        assert has(found, "aijobs_http_request_duration_seconds_count", api=api)
        assert has(found, "aijobs_http_request_duration_seconds_sum", api=api)
    assert found.value("aijobs_http_requests_total", api="user") == 0
    # The fixture's /healthz probes are counted: their series once, with the real figure (each
    # process adds its counts to Redis every METRICS_FLUSH_SECONDS, so a later scrape shows them).
    wait_for(
        lambda: scrape(fresh).value("aijobs_http_requests_total", api="other", status="200") >= 1,
        timeout=10,
        every=0.2,
        what="the probes counted",
    )


def test_a_configured_model_has_its_series_before_its_first_task(fresh: Gunicorn):
    make_model("echo", queue_limit=40)
    found = scrape(fresh)
    for name, (_, labels) in {**DOCUMENTED_METRICS, **ALERTED}.items():
        if "model_name" in labels:
            assert found.labels[name] == labels, (name, found.labels[name])
    for outcome in OUTCOMES:
        assert series(found, "asynch_model_calls_total")[(("model_name", "echo"), ("outcome", outcome))] == 0
    for state in "0123":
        assert has(found, "asynch_tasks", state=state, model_name="echo")
    assert series(found, "asynch_semaphore_in_use") == {(("model_name", "echo"),): 0}
    assert series(found, "asynch_model_queue_limit") == {(("model_name", "echo"),): 40}


def test_a_counted_series_is_given_once_with_its_count(fresh: Gunicorn):
    assert fresh.get("/ai/profile").status_code == 401
    assert fresh.get("/no-such-page").status_code == 404

    def counted() -> Scrape | None:
        found = scrape(fresh)
        return found if found.value("aijobs_http_requests_total", api="user", status="401") == 1 else None

    found = wait_for(counted, timeout=10, every=0.2, what="the 401 counted")
    assert series(found, "aijobs_http_requests_total")[(("api", "user"), ("status", "200"))] == 0
    assert found.value("aijobs_http_request_duration_seconds_count", api="user") == 1
    assert found.value("aijobs_http_request_duration_seconds_count", api="internal") == 0
