"""Contract §3, "a lost answer costs nothing" and "every model call counts", through
an unreliable network: the project's own fault-injecting TCP proxy
(``tests.support.fault_fixtures.TcpProxy``: lost answers, resets, latency,
partitions) between the reference runtime (threads) and gunicorn on the test
database, with a lease of ``LEASE_SECONDS`` and the stand-in model behind the
runtime. What the proxy does to each request decides nothing on its own: the
counts are the database's (jobs, results, invocation logs, the user's day, the
platform's day, ``/metrics``) against what the stand-in model served."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from django.db import connection
from django.db.models import Sum
from prometheus_client.parser import text_string_to_metric_families

from ai_jobs import services
from ai_jobs.models import AiInvocationLog, AiRuntimeJob, AiRuntimeResult
from quotas.models import PlatformDailyUsage, UserAiUsage
from runtime_worker.api import ApiError, ApiUnavailable, InternalApi
from runtime_worker.standin import StandinServer
from tests.support import runtime_fixtures
from tests.support.factories import VALID_OUTPUTS, UserFactory
from tests.support.fault_fixtures import TcpProxy
from tests.support.runtime_e2e import final, make_job, standin_requests
from tests.support.runtime_fixtures import E2E_TOKEN, serve_api, server_env, wait_for

standin = runtime_fixtures.standin
start_runtime = runtime_fixtures.start_runtime
_no_leftover_faults = runtime_fixtures._no_leftover_faults

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LEASE_SECONDS = 5
TYPE = "learning_state_analysis"
OUTPUT = VALID_OUTPUTS[TYPE]
# The runtimes through the proxy: a heartbeat well within the lease, and a call that waits
# for its answer short of it, so that a lost answer is sent again while the lease is live.
RUNTIME = {"heartbeat_seconds": 1.0, "api_timeout_seconds": 2.0, "submit_retry_seconds": 60.0}


@pytest.fixture(scope="module")
def api_server(
    django_db_setup: None, django_db_blocker: Any, standin: StandinServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """gunicorn on the test database, with a lease of LEASE_SECONDS."""
    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            pytest.skip("the end-to-end runtime tests need PostgreSQL")
        env = server_env(standin, AI_JOB_LOCK_SECONDS=str(LEASE_SECONDS))
    with serve_api(env, tmp_path_factory.mktemp("gunicorn") / "gunicorn.log") as url:
        yield url


@pytest.fixture
def proxies(api_server: str) -> Iterator[Callable[..., TcpProxy]]:
    """``make(seed)``: a fault proxy in front of gunicorn; all closed after the test."""
    made: list[TcpProxy] = []
    address = urlsplit(api_server)

    def make(seed: int = 0) -> TcpProxy:
        proxy = TcpProxy((address.hostname or "127.0.0.1", address.port or 80), seed=seed)
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.close()


@pytest.fixture
def reaper() -> Iterator[None]:
    """What Celery beat does every AI_JOB_REAPER_INTERVAL_SECONDS, more often."""
    stop = threading.Event()

    def reap() -> None:
        try:
            while not stop.wait(0.5):
                services.jobs_reap()
        finally:
            connection.close()

    thread = threading.Thread(target=reap, name="reaper", daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=10)


def _api(url: str, instance_id: str) -> InternalApi:
    return InternalApi(url, E2E_TOKEN, instance_id, timeout=10)


def _result(api: InternalApi, job_id: str, attempt_no: int) -> dict[str, Any]:
    return api.result(
        job_id,
        attempt_no=attempt_no,
        output_schema_version="v1",
        output=OUTPUT,
        usage={"promptTokens": 10, "completionTokens": 5, "totalTokens": 15},
        cost_cents=Decimal("0.01"),
    )


# --- each rule through the proxy ------------------------------------------------------------------


def test_a_result_whose_answer_is_lost_and_resent_answers_duplicate(proxies):
    proxy, job = proxies(), make_job()
    api = _api(proxy.url, "rt-lost-result")
    [claimed] = api.claim([TYPE], 1, claim_id=uuid.uuid4().hex)
    proxy.lose_next("/result")
    with pytest.raises(ApiUnavailable):
        _result(api, job.id, claimed.attempt_no)
    answer = _result(api, job.id, claimed.attempt_no)
    assert answer["status"] == "succeeded" and answer["duplicate"] is True
    assert proxy.lost == [f"POST /internal/runtime/jobs/{job.id}/result HTTP/1.1"]
    assert AiRuntimeResult.objects.filter(job_id=job.id).count() == 1


def test_a_claim_whose_answer_is_lost_resent_with_its_claim_id_answers_the_same_jobs(proxies):
    proxy = proxies()
    jobs = [make_job() for _ in range(3)]
    api = _api(proxy.url, "rt-lost-claim")
    proxy.record("/jobs/claim")
    proxy.lose_next("/jobs/claim")
    with pytest.raises(ApiUnavailable):
        api.claim([TYPE], 2, claim_id="claim-lost-1")
    [(_, _, _, lost)] = proxy.answers
    again = api.claim([TYPE], 2, claim_id="claim-lost-1")
    assert [(job.job_id, job.attempt_no) for job in again] == [
        (job["jobId"], job["attemptNo"]) for job in json.loads(lost)["jobs"]
    ]
    assert [job.job_id for job in again] == [job.id for job in jobs[:2]]
    assert AiRuntimeJob.objects.filter(status="pending", attempt_no=0).count() == 1  # nothing more locked
    for job in again:
        _result(api, job.job_id, job.attempt_no)
    assert set(AiRuntimeJob.objects.filter(status="succeeded").values_list("attempt_no", "retry_count")) == {(1, 0)}


def test_a_fail_whose_answer_is_lost_and_resent_answers_200(proxies):
    proxy, job = proxies(), make_job()
    api = _api(proxy.url, "rt-lost-fail")
    [claimed] = api.claim([TYPE], 1, claim_id=uuid.uuid4().hex)
    proxy.lose_next("/fail")
    with pytest.raises(ApiUnavailable):
        api.fail(job.id, attempt_no=claimed.attempt_no, error_code="MODEL_TIMEOUT", error_message="no answer")
    answer = api.fail(job.id, attempt_no=claimed.attempt_no, error_code="MODEL_TIMEOUT", error_message="no answer")
    assert answer == {"jobId": job.id, "status": "pending", "retryCount": 1}
    assert AiRuntimeJob.objects.get(id=job.id).retry_count == 1


def test_a_stale_attempts_late_result_answers_job_not_active(proxies, reaper):
    """Attempt 1's result is held in a partition past its lease; attempt 2, of another
    runtime, succeeds with the same output; then attempt 1's result arrives."""
    proxy, job = proxies(), make_job()
    stale, fresh = _api(proxy.url, "rt-stale"), _api(f"http://127.0.0.1:{proxy.upstream[1]}", "rt-fresh")
    [first] = stale.claim([TYPE], 1, claim_id=uuid.uuid4().hex)
    stale.timeout = 60
    proxy.partition()
    answer: list[Exception | dict[str, Any]] = []
    late = threading.Thread(target=lambda: answer.append(_catch(lambda: _result(stale, job.id, first.attempt_no))))
    late.start()
    second = wait_for(
        lambda: fresh.claim([TYPE], 1, claim_id=uuid.uuid4().hex), timeout=30, every=0.5, what="attempt 2"
    )
    assert second[0].attempt_no == first.attempt_no + 1
    assert _result(fresh, job.id, second[0].attempt_no)["duplicate"] is False
    proxy.heal()
    late.join(timeout=60)
    [refused] = answer
    assert isinstance(refused, ApiError) and (refused.status, refused.code) == (409, "JOB_NOT_ACTIVE"), refused
    assert AiRuntimeResult.objects.get(job_id=job.id).attempt_no == second[0].attempt_no


def _catch(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as error:
        return error


# --- the reference runtime through the proxy ----------------------------------------------------------


def test_the_runtime_sends_a_lost_claim_again_and_its_jobs_lose_no_retry(proxies, start_runtime):
    proxy = proxies()
    jobs = [make_job() for _ in range(4)]
    proxy.lose_next("/jobs/claim")
    proxy.lose_next("/jobs/claim")
    start_runtime("rt-resends-claims", api_url=proxy.url, **RUNTIME)
    for job in jobs:
        done = final(job, timeout=60)
        assert (done.status, done.attempt_no, done.retry_count) == ("succeeded", 1, 0)
    assert len(proxy.lost) == 2


def test_the_runtime_sends_a_lost_result_and_a_lost_fail_again(proxies, start_runtime, standin):
    proxy = proxies()
    nonce = uuid.uuid4().hex
    standin.model.add_faults([{"invalidOutput": True, "match": nonce, "times": 1}])
    failing, succeeding = make_job(params={"case": nonce}, max_retry_count=0), make_job()
    proxy.lose_next("/result")
    proxy.lose_next("/fail")
    runtime = start_runtime("rt-resends-reports", api_url=proxy.url, concurrency=1, **RUNTIME)
    assert final(failing).status == "failed" and final(succeeding).status == "succeeded"
    assert sorted(line.split()[1].rsplit("/", 1)[-1] for line in proxy.lost) == ["fail", "result"]
    wait_for(lambda: sum(runtime.stats.values()) == 2, what="both attempts ended")
    # The resent reports were answered: neither attempt was abandoned.
    assert runtime.stats == {"succeeded": 1, "failed:MODEL_RESPONSE_INVALID": 1}


def _tokens(api_server: str) -> dict[str, int]:
    text = requests.get(f"{api_server}/metrics", timeout=10).text
    [family] = [f for f in text_string_to_metric_families(text) if f.name == "aijobs_platform_tokens_today"]
    return {
        "user's day": UserAiUsage.objects.aggregate(n=Sum("tokens_used"))["n"] or 0,
        "platform's day": PlatformDailyUsage.objects.aggregate(n=Sum("tokens_used"))["n"] or 0,
        "/metrics": int(family.samples[0].value),
    }


def _served(standin: StandinServer) -> int:
    return int(standin.model.snapshot_stats().get("tokens", 0))


def test_a_partition_longer_than_the_lease_during_a_model_call_loses_no_token(
    api_server, proxies, start_runtime, standin, reaper
):
    """The model call outlives a partition of 20 s against a lease of 5 s: its runtime
    learns its lease is gone in the middle of the call, which goes on and is charged;
    another runtime finishes the job meanwhile. The call is reported once it ends, with
    its tokens, and the runtime goes on to claim new work."""
    proxy = proxies()
    nonce = uuid.uuid4().hex
    standin.model.add_faults([{"delay": 23, "match": nonce, "times": 1}])
    user = UserFactory()
    job = make_job(user=user, params={"case": nonce})
    cut_off = start_runtime("rt-cut-off", api_url=proxy.url, concurrency=1, **RUNTIME)
    wait_for(lambda: standin_requests(standin) >= 1, what="the model call")
    proxy.partition_for(20)
    other = start_runtime("rt-other", concurrency=1, **RUNTIME)
    done = final(job, timeout=30)
    assert (done.status, done.attempt_no) == ("succeeded", 2)
    assert AiRuntimeResult.objects.get(job=done).runtime_instance_id == "rt-other"
    log = wait_for(
        lambda: AiInvocationLog.objects.filter(job=done, attempt_no=1).first(), timeout=40, what="attempt 1's call"
    )
    assert (log.error_code, log.runtime_instance_id) == ("JOB_NOT_ACTIVE", "rt-cut-off") and log.total_tokens > 0
    assert cut_off.stats == {"abandoned": 1}
    other.stop(timeout=15)
    after = make_job(user=user)
    assert final(after, timeout=30).status == "succeeded"
    assert AiRuntimeResult.objects.get(job=after).runtime_instance_id == "rt-cut-off"
    cut_off.stop(timeout=15)
    served = _served(standin)
    assert served > 0 and _tokens(api_server) == {"user's day": served, "platform's day": served, "/metrics": served}


# --- the soak ---------------------------------------------------------------------------------------------

SOAK_JOBS = 300
SOAK_RUNTIMES = 4


def test_a_soak_through_lost_answers_resets_and_partitions_loses_nothing_and_counts_everything(
    api_server, proxies, start_runtime, standin, reaper
):
    users = [UserFactory() for _ in range(10)]
    jobs = [make_job(user=users[n % len(users)]) for n in range(SOAK_JOBS)]
    network = []
    for n in range(SOAK_RUNTIMES):
        proxy = proxies(seed=n)
        proxy.lose_rate, proxy.reset_rate, proxy.latency = 0.03, 0.01, 0.002
        proxy.record("/jobs/claim")
        network.append(proxy)
    runtimes = [
        start_runtime(f"rt-soak-{n}", api_url=proxy.url, concurrency=4, **RUNTIME) for n, proxy in enumerate(network)
    ]
    began = time.monotonic()
    # Partitions longer than a lease, one runtime at a time, while the others work on.
    for proxy, at in ((network[0], 2.0), (network[2], 4.0)):
        time.sleep(max(0.0, began + at - time.monotonic()))
        proxy.partition_for(LEASE_SECONDS + 2)
    wait_for(
        lambda: AiRuntimeJob.objects.filter(status__in=("succeeded", "failed", "cancelled")).count() == SOAK_JOBS,
        timeout=120,
        every=0.5,
        what="every job to end",
    )
    for runtime in runtimes:
        runtime.request_stop()
    for runtime in runtimes:
        runtime.stop(timeout=30)

    # 0 lost, 0 succeeded twice.
    assert AiRuntimeJob.objects.filter(id__in=[j.id for j in jobs], status="succeeded").count() == SOAK_JOBS
    assert AiRuntimeResult.objects.count() == SOAK_JOBS
    assert sum(len(proxy.lost) for proxy in network) > 0 and sum(len(proxy.resets) for proxy in network) > 0
    assert [len(proxy.partitions) for proxy in network] == [1, 0, 1, 0]

    # Tokens served = tokens counted.
    served = _served(standin)
    assert served > 0 and _tokens(api_server) == {"user's day": served, "platform's day": served, "/metrics": served}

    # No retry spent on an attempt that never reached a model, unless a partition cut its
    # runtime off within a lease of its claim.
    modelled = set(AiInvocationLog.objects.values_list("job_id", "attempt_no"))
    # When each attempt was handed out: the first claim answer that carried it (its request's
    # arrival at the server, a lower bound of the claim's moment), lost answers included.
    handed: dict[tuple[str, int], tuple[float, TcpProxy]] = {}
    for proxy in network:
        for at, _came, _line, body in proxy.answers:
            for job in json.loads(body or b"{}").get("jobs", []):
                key = (job["jobId"], job["attemptNo"])
                if key not in handed or at < handed[key][0]:
                    handed[key] = (at, proxy)
    unexplained = []
    for job_id, attempts in AiRuntimeJob.objects.values_list("id", "attempt_no"):
        for attempt in range(1, attempts + 1):
            if (job_id, attempt) in modelled:
                continue
            at, proxy = handed.get((job_id, attempt), (None, None))
            cut = proxy is not None and any(
                start <= at + LEASE_SECONDS and (end is None or end >= at) for start, end in proxy.partitions
            )
            if not cut:
                unexplained.append((job_id, attempt, at))
    assert unexplained == [], f"attempts that never reached a model, no partition near their claim: {unexplained}"
