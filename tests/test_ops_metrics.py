"""``GET /metrics`` in process: every metric with its type and labels,
the queue gauges and the counters following jobs through their life, the breaker,
runtimes, model-asynch, the token, and counters that survive a Redis outage."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from ai_jobs import services
from ai_jobs.models import RuntimeInstance
from asynch.semaphore import semaphore_key
from config.observability import metrics, middleware
from tests.support.api import ALL_TYPES, RuntimeClient, error_code
from tests.support.asynch_fixtures import get_semaphore, make_model, model_server_fixture, run_queue, tenant_client  # noqa: F401
from tests.support.factories import VALID_OUTPUTS, JobFactory
from tests.support.ops import DOCUMENTED_METRICS, PrivateRedis, Scrape

# Real commits: the counters are recorded once the transaction that finished a job commits.
pytestmark = pytest.mark.django_db(transaction=True)


def scrape(client: Client | None = None, **headers: str) -> Scrape:
    response = (client or Client()).get("/metrics", **headers)
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/plain")
    return Scrape.parse(response.content.decode())


def _run_job(runtime: RuntimeClient, job_id: str, tokens: int = 120) -> None:
    attempt = runtime.lock(job_id).json()["attemptNo"]
    assert runtime.heartbeat(job_id).status_code == 200
    usage = {"promptTokens": tokens - 20, "completionTokens": 20, "totalTokens": tokens}
    answer = runtime.result(job_id, attempt, VALID_OUTPUTS["learning_state_analysis"], usage=usage, costCents="0.5")
    assert answer.status_code == 200, answer.content


def test_every_documented_metric_is_there_with_its_type_and_labels(runtime, model_server, settings):
    settings.ASYNCH_SEMAPHORE_REDIS_URL = settings.REDIS_URL
    JobFactory()
    _run_job(runtime, JobFactory().id)
    make_model("echo", base_url=model_server.url)
    tenant_client("acme").create_task("echo", {"q": 1})
    run_queue()
    metrics.NOTIFICATIONS_FAILED.inc()
    Client().get("/ai/profile")  # a user-API request (401) for the HTTP metrics
    found = scrape()
    for name, (kind, labels) in DOCUMENTED_METRICS.items():
        assert found.types.get(name) == kind, (name, found.types.get(name))
        assert found.labels[name] == labels, (name, found.labels[name])
    assert found.value("aijobs_http_requests_total", api="user", status="401") == 1
    assert found.value("aijobs_http_request_duration_seconds_count", api="user") == 1
    assert found.value("asynch_model_calls_total", model_name="echo", outcome="ok") == 1
    assert found.value("asynch_tasks", state="2", model_name="echo") == 1
    assert found.value("aijobs_model_tokens_total", api_key_mode="platform_key") == 120
    assert found.value("aijobs_notifications_failed_total") == 1


@pytest.mark.embedded
def test_every_family_is_in_a_scrape_before_anything_happened_whichever_the_store():
    found = scrape()
    for name, (kind, labels) in DOCUMENTED_METRICS.items():
        assert found.types.get(name) == kind, (name, found.types.get(name))
        if "model_name" not in labels:  # no model configured: declared, with no sample
            assert found.labels[name] == labels, (name, found.labels[name])
    for status in ("succeeded", "failed", "cancelled"):
        for job_type in ALL_TYPES:
            assert found.has("aijobs_jobs_finished_total") and any(
                sample == "aijobs_jobs_finished_total" and labels["status"] == status and labels["job_type"] == job_type
                for sample, labels, _ in found.samples
            ), (status, job_type)


def test_the_apis_seeded_are_the_middleware_s():
    assert set(metrics.HTTP_APIS) == {*middleware._API_OF.values(), "other"}
    assert middleware.api_of("/no/such/path") in metrics.HTTP_APIS


def test_three_jobs_are_pending_until_they_succeed_then_counted_as_finished(runtime):
    before = scrape()
    jobs = [JobFactory(job_type=job_type) for job_type in ALL_TYPES[:3]]
    during = scrape()
    assert during.value("aijobs_queue_jobs", status="pending") == 3
    assert during.value("aijobs_queue_jobs", status="pending", job_type=ALL_TYPES[0]) == 1
    for job in jobs:
        job.job_type = "learning_state_analysis"  # one output shape is enough here
        job.save(update_fields=["job_type"])
        _run_job(runtime, job.id)
    after = scrape()
    assert after.value("aijobs_queue_jobs", status="pending") == 0
    finished = "aijobs_jobs_finished_total"
    assert after.value(finished, status="succeeded") - before.value(finished, status="succeeded") == 3
    assert after.value(finished, status="succeeded", job_type="learning_state_analysis", error_code="") == 3
    assert after.value("aijobs_model_tokens_total") - before.value("aijobs_model_tokens_total") == 360


def test_failures_cancellations_and_the_reaper_are_counted_with_their_codes(runtime):
    failed, cancelled, pending = JobFactory(max_retry_count=0), JobFactory(), JobFactory()
    lapsed = JobFactory(max_retry_count=0)
    runtime.lock(failed.id)
    assert runtime.fail(failed.id, 1, "MODEL_RESPONSE_INVALID").json()["status"] == "failed"
    services.jobs_cancel(job_ids=[cancelled.id])
    runtime.lock(lapsed.id)
    type(lapsed).objects.filter(id=lapsed.id).update(lock_until=timezone.now() - dt.timedelta(seconds=1))
    assert scrape().value("aijobs_leases_lapsed") == 1
    services.jobs_reap()
    found = scrape()
    finished = "aijobs_jobs_finished_total"
    assert found.value(finished, status="failed", error_code="MODEL_RESPONSE_INVALID") == 1
    assert found.value(finished, status="cancelled", error_code="JOB_CANCELLED") == 1
    assert found.value(finished, status="failed", error_code="JOB_TIMEOUT") == 1
    assert found.value("aijobs_leases_lapsed") == 0
    assert found.value("aijobs_queue_jobs", status="pending") == 1 and pending.status == "pending"


def test_the_oldest_due_pending_job_is_aged_by_type_and_backing_off_jobs_are_not_due():
    now = timezone.now()
    JobFactory(job_type="quiz_generation", created_at=now - dt.timedelta(minutes=5))
    JobFactory(job_type="quiz_generation", created_at=now - dt.timedelta(minutes=1))
    JobFactory(
        job_type="weak_point_analysis",
        created_at=now - dt.timedelta(hours=1),
        available_at=now + dt.timedelta(minutes=5),  # backing off after a failure: not due
    )
    found = scrape()
    assert 300 <= found.value("aijobs_queue_oldest_pending_seconds", job_type="quiz_generation") < 330
    assert found.value("aijobs_queue_oldest_pending_seconds", job_type="weak_point_analysis") == 0
    assert found.value("aijobs_queue_pending_due_jobs", job_type="weak_point_analysis") == 0
    assert found.value("aijobs_queue_jobs", status="pending", job_type="weak_point_analysis") == 1


def test_a_breaker_opened_in_the_admin_is_open_at_the_next_scrape():
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("op", "op@example.com", "pw"))
    assert scrape().value("aijobs_breaker_state", state="closed") == 1
    response = admin.post("/admin/quotas/platformcircuitbreaker/", {"to_state": "open", "reason": "provider outage"})
    assert response.status_code == 302
    found = scrape()
    assert found.value("aijobs_breaker_state", state="open") == 1
    assert found.value("aijobs_breaker_state", state="closed") == 0
    assert found.value("aijobs_breaker_state", state="half_open") == 0


def test_runtimes_active_counts_lease_holders_and_recent_callers_only(settings):
    settings.AI_JOB_LOCK_SECONDS = 60
    settings.RUNTIME_SEEN_WRITE_SECONDS = 0
    holder, poller, gone = RuntimeClient("holder-1"), RuntimeClient("poller-1"), RuntimeClient("gone-1")
    holder.lock(JobFactory().id)
    poller.claim(capabilities=["quiz_generation"])  # an idle runtime: no job, but alive
    gone.claim(capabilities=["quiz_generation"])
    RuntimeInstance.objects.filter(instance_id="gone-1").update(last_seen_at=timezone.now() - dt.timedelta(seconds=121))
    assert scrape().value("aijobs_runtimes_active") == 2


def test_a_task_holding_a_semaphore_slot_shows_in_use(settings, model_server):
    settings.ASYNCH_SEMAPHORE_REDIS_URL = settings.REDIS_URL
    make_model("slow", base_url=model_server.url)
    acme = tenant_client("acme")
    task_id = acme.create_task("slow", {}).json()["taskId"]
    type(acme.tenant.tasks.first()).objects.filter(id=task_id).update(state=1, lease_until=timezone.now())
    get_semaphore().acquire(semaphore_key(acme.tenant.id, "slow"), limit=5, token="t1", lease_seconds=30)
    found = scrape()
    assert found.value("asynch_semaphore_in_use", model_name="slow") == 1
    assert found.value("asynch_tasks", state="1", model_name="slow") == 1
    get_semaphore().release(semaphore_key(acme.tenant.id, "slow"), token="t1")


def test_metrics_token_is_required_when_set(settings):
    settings.METRICS_TOKEN = "metrics-secret-0123456789"
    client = Client()
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong-token"}, {"HTTP_AUTHORIZATION": "Basic x"}):
        response = client.get("/metrics", **headers)
        assert response.status_code == 401 and error_code(response) == "UNAUTHORIZED"
    assert scrape(client, HTTP_AUTHORIZATION="Bearer metrics-secret-0123456789").has("aijobs_queue_jobs")


def test_counters_survive_a_redis_outage_and_arrive_when_it_is_back(tmp_path, caplog):
    server = PrivateRedis(tmp_path)  # not started yet: nothing listens on its port
    store = metrics.RedisStore(server.url, key="test:metrics", flush_seconds=3600)
    caplog.set_level(logging.WARNING, logger="config.observability.metrics")
    for _ in range(3):
        store.inc(metrics.JOBS_FINISHED, ("succeeded", "quiz_generation", ""), 1)
        store.flush()  # Redis is down: kept, and said once
    assert len([r for r in caplog.records if "Redis unreachable" in r.getMessage()]) == 1
    server.start()
    try:
        store.observe(metrics.HTTP_DURATION, ("user",), 0.03)
        found = Scrape.parse(_text(store.collect()))
        assert found.value("aijobs_jobs_finished_total", status="succeeded") == 3
        assert found.value("aijobs_http_request_duration_seconds_bucket", api="user", le="0.05") == 1
        assert found.value("aijobs_http_request_duration_seconds_bucket", api="user", le="0.025") == 0
        assert found.value("aijobs_http_request_duration_seconds_count", api="user") == 1
    finally:
        server.stop()


def test_a_request_is_answered_when_metrics_cannot_be_recorded(settings):
    settings.METRICS_REDIS_URL = "redis://127.0.0.1:9/0"  # nothing listens there
    metrics.reset_store()
    try:
        response = Client().get("/healthz")
        assert response.status_code == 200
        metrics.flush()
    finally:
        metrics.reset_store()


def _text(families: list) -> str:
    from prometheus_client.exposition import generate_latest
    from prometheus_client.registry import CollectorRegistry

    class Fixed:
        def collect(self):  # type: ignore[no-untyped-def]
            return families

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())
    return generate_latest(registry).decode()


def test_a_flush_returns_once_a_background_flush_under_way_has_landed(settings):
    """A scrape, a worker's exit and the suite's clear between tests rely on it."""
    import threading

    store = metrics.RedisStore(settings.REDIS_URL, key="test:metrics:flushing", flush_seconds=3600)
    store._client.delete(store.key)
    sending, real_pipeline = threading.Event(), store._client.pipeline

    class SlowPipeline:
        def __init__(self, *args: object, **kwargs: object) -> None:
            self._pipe = real_pipeline(*args, **kwargs)

        def hincrbyfloat(self, *args: object) -> None:
            self._pipe.hincrbyfloat(*args)

        def execute(self) -> list:
            sending.set()
            threading.Event().wait(0.5)  # the background flush, slow on the network
            return self._pipe.execute()

    store._client.pipeline = SlowPipeline  # type: ignore[method-assign]
    store.inc(metrics.JOBS_FINISHED, ("succeeded", "quiz_generation", ""), 1)
    background = threading.Thread(target=store.flush)
    background.start()
    assert sending.wait(5)
    store.flush()  # nothing left in the buffer: it waits for the one under way
    try:
        assert store._client.hgetall(store.key), "flush returned before the counts under way were in Redis"
    finally:
        background.join()
        store._client.delete(store.key)
