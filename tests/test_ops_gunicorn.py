"""The metrics, probes and logs checked from outside: gunicorn with several workers, as production
runs it (``-c config/gunicorn.py``, ``LOG_FORMAT=json``), once with the counters in
Redis and once in prometheus-client's multiprocess files (the embedded default)."""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from accounts.api.tokens import AccessToken
from tests.support.factories import VALID_OUTPUTS, UserFactory, consent
from tests.support.ops import Gunicorn, PrivateRedis, Scrape, gunicorn
from tests.support.runtime_fixtures import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
RUNTIME = {"Authorization": "Bearer ops-runtime-token-for-the-test-servers", "x-runtime-instance-id": "ops-runtime-1"}


@pytest.fixture(params=["redis", "multiprocess-files"])
def server(request: pytest.FixtureRequest, tmp_path: Path, settings) -> Gunicorn:
    env = {"LOG_FORMAT": "json"}
    if request.param == "redis":
        env["REDIS_URL"] = settings.REDIS_URL
    else:
        env.update(REDIS_URL="<unset>", METRICS_REDIS_URL="<unset>", PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "mp"))
    with gunicorn(tmp_path / "gunicorn.log", workers=3, env=env) as running:
        yield running


def scrapes(server: Gunicorn, count: int = 24) -> list[tuple[str, Scrape]]:
    """``count`` scrapes from 6 threads at once, each on a new connection and with
    its own request id, so several workers answer."""

    def one(_: int) -> tuple[str, Scrape]:
        request_id = f"scrape-{uuid.uuid4().hex[:12]}"
        response = server.get("/metrics", headers={"X-Request-ID": request_id})
        assert response.status_code == 200 and response.headers["X-Request-ID"] == request_id
        return request_id, Scrape.parse(response.text)

    with ThreadPoolExecutor(6) as pool:
        return list(pool.map(one, range(count)))


def workers_that_answered(server: Gunicorn, request_ids: set[str]) -> set[int]:
    records = [json.loads(line) for line in server.lines()]
    return {r["process"] for r in records if r.get("requestId") in request_ids and r["logger"] == "gunicorn.access"}


def test_every_worker_reports_the_same_queue_and_counters_through_a_job_s_life(server: Gunicorn):
    user = UserFactory()
    consent(user)
    learner = {"Authorization": f"Bearer {AccessToken.for_user(user)}"}
    before = scrapes(server, 6)[0][1].value("aijobs_jobs_finished_total", status="succeeded")
    for n in range(3):
        body = {
            "jobType": "learning_state_analysis",
            "targetType": "user",
            "targetId": "me",
            "idempotencyKey": f"k{n}",
        }
        created = requests.post(server.url + "/ai/jobs", json=body, headers=learner, timeout=10)
        assert created.status_code == 201, created.text

    # Which worker takes a connection is the kernel's choice, and a busy machine may hand one
    # worker a whole batch: scrape again until two workers or more have answered.
    pending: list[tuple[str, Scrape]] = []

    def two_workers_answered() -> bool:
        pending.extend(scrapes(server, 12))
        assert {scrape.value("aijobs_queue_jobs", status="pending") for _, scrape in pending} == {3}
        return len(workers_that_answered(server, {rid for rid, _ in pending})) >= 2

    wait_for(two_workers_answered, timeout=30, every=0.3, what="scrapes answered by two workers or more")

    claimed = requests.post(server.url + "/internal/runtime/jobs/claim", json={"capabilities": ["learning_state_analysis"],
                            "limit": 10}, headers=RUNTIME, timeout=10).json()["jobs"]  # fmt: skip
    assert len(claimed) == 3
    for job in claimed:
        url = f"{server.url}/internal/runtime/jobs/{job['jobId']}"
        assert requests.post(url + "/heartbeat", json={}, headers=RUNTIME, timeout=10).status_code == 200
        result = {"attemptNo": job["attemptNo"], "output": VALID_OUTPUTS["learning_state_analysis"],
                  "usage": {"promptTokens": 90, "completionTokens": 10, "totalTokens": 100}, "costCents": "0.25"}  # fmt: skip
        assert requests.post(url + "/result", json=result, headers=RUNTIME, timeout=10).status_code == 200

    def all_agree() -> list[tuple[str, Scrape]] | None:
        found = scrapes(server, 12)
        risen = {scrape.value("aijobs_jobs_finished_total", status="succeeded") - before for _, scrape in found}
        two_workers = len(workers_that_answered(server, {rid for rid, _ in found})) >= 2
        return found if risen == {3} and two_workers else None

    after = wait_for(all_agree, timeout=15, every=0.3, what="every worker to count 3 succeeded jobs")
    assert {scrape.value("aijobs_queue_jobs", status="pending") for _, scrape in after} == {0}
    assert {scrape.value("aijobs_runtimes_active") for _, scrape in after} == {1}
    assert {scrape.value("aijobs_platform_tokens_today") for _, scrape in after} == {300}
    assert all(scrape.value("aijobs_http_requests_total", api="user", status="201") >= 3 for _, scrape in after)
    assert len(workers_that_answered(server, {rid for rid, _ in after})) >= 2


def test_a_request_id_comes_back_and_every_line_the_request_caused_is_json_carrying_it(tmp_path: Path, settings):
    with gunicorn(
        tmp_path / "gunicorn.log", workers=2, env={"LOG_FORMAT": "json", "REDIS_URL": settings.REDIS_URL}
    ) as server:
        response = server.get("/no-such-page-xyz", headers={"X-Request-ID": "abc-123"})
        assert response.status_code == 404 and response.headers["X-Request-ID"] == "abc-123"
        fresh = server.get("/healthz", headers={"X-Request-ID": "not well formed!"}).headers["X-Request-ID"]
        assert fresh != "not well formed!" and len(fresh) == 32

        def caused() -> list[dict] | None:
            records = [json.loads(line) for line in server.lines()]  # every line is one JSON object
            found = [r for r in records if "/no-such-page-xyz" in r["message"]]
            return found or None

        found = wait_for(caused, timeout=10, what="the access line")
        assert [(r["logger"], r["level"]) for r in found] == [("gunicorn.access", "WARNING")]  # one line
        assert all(r["requestId"] == "abc-123" for r in found)
        assert all({"time", "level", "logger", "message"} <= set(r) for r in found)


def test_readyz_names_redis_while_it_is_down_and_healthz_and_metrics_still_answer(tmp_path: Path):
    redis_server = PrivateRedis(tmp_path).start()
    env = {"LOG_FORMAT": "json", "REDIS_URL": redis_server.url, "READINESS_TIMEOUT_SECONDS": "1"}
    try:
        with gunicorn(tmp_path / "gunicorn.log", workers=2, env=env) as server:
            assert server.get("/readyz").json()["checks"] == {"database": "ok", "redis": "ok", "broker": "ok"}
            redis_server.stop()
            deadline = time.monotonic() + 10  # each worker computes /readyz at most once a second
            while (down := server.get("/readyz")).status_code != 503:
                assert time.monotonic() < deadline, "/readyz never saw redis stop"
                time.sleep(0.2)
            assert down.json()["status"] == "unavailable"
            assert down.json()["checks"] == {"database": "ok", "redis": "unavailable", "broker": "ok"}
            assert server.get("/healthz").status_code == 200
            scrape = server.get("/metrics")
            assert scrape.status_code == 200
            parsed = Scrape.parse(scrape.text)
            assert parsed.value("aijobs_metrics_source_up", source="counters") == 0
            assert parsed.value("aijobs_metrics_source_up", source="database") == 1 and parsed.has("aijobs_queue_jobs")
            redis_server.start()
            wait_for(lambda: server.get("/readyz").status_code == 200, timeout=10, what="ready again")
    finally:
        redis_server.stop()
