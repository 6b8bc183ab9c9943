"""What the reference runtime's reports count for, end to end (gunicorn on the test
PostgreSQL database, the stand-in model, runtimes as threads): a provider that hangs
opens the circuit breaker, runtimes that stop do not, and the tokens of a result the
server refused still reach the user's day and the platform's."""

from __future__ import annotations

import uuid

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from accounts.selectors import public_id_of
from ai_jobs.models import AiInvocationLog, AiRuntimeJob
from quotas import selectors as quota_selectors
from quotas.models import CircuitState
from tests.support import runtime_fixtures
from tests.support.factories import UserFactory
from tests.support.runtime_e2e import final, make_job, standin_requests
from tests.support.runtime_fixtures import wait_for

api_server = runtime_fixtures.api_server
standin = runtime_fixtures.standin
start_runtime = runtime_fixtures.start_runtime
_no_leftover_faults = runtime_fixtures._no_leftover_faults

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_ten_platform_key_jobs_whose_model_call_hangs_past_its_time_open_the_breaker(start_runtime, standin):
    nonce = uuid.uuid4().hex
    standin.model.add_faults([{"delay": 30, "match": nonce, "times": None}])
    user = UserFactory()
    # The job's timeoutSeconds, not the call's own timeout (180 s), is what cuts each call;
    # 4 s leaves the report a margin of 1 s to reach the live attempt on a loaded machine.
    jobs = [make_job(user=user, params={"case": nonce}, timeout_seconds=4, max_retry_count=0) for _ in range(10)]
    start_runtime("rt-hanging-provider", concurrency=5)
    for job in jobs:
        done = final(job, timeout=30)
        assert (done.status, done.error_code) == ("failed", "MODEL_TIMEOUT"), done.error_message
    # A failure is counted after its job's transaction: the last one may still be on its way.
    wait_for(lambda: quota_selectors.breaker_get().state == CircuitState.OPEN, timeout=10, what="the breaker open")
    breaker = quota_selectors.breaker_get()
    assert (breaker.state, breaker.consecutive_failures) == (CircuitState.OPEN, 10)


def test_ten_runtimes_stopped_in_the_middle_of_a_job_leave_the_breaker_closed(start_runtime, standin):
    nonce = uuid.uuid4().hex
    standin.model.add_faults([{"delay": 30, "match": nonce, "times": None}])
    user = UserFactory()
    jobs = [make_job(user=user, params={"case": nonce}) for _ in range(10)]
    runtimes = [start_runtime(f"rt-deployed-{n}", concurrency=1, grace_seconds=0.2) for n in range(10)]
    wait_for(lambda: standin_requests(standin) >= 10, timeout=30, what="every runtime in its model call")
    for runtime in runtimes:
        runtime.request_stop()
    for runtime in runtimes:
        runtime.stop(timeout=15)
    assert sorted(sum(runtime.stats.values()) for runtime in runtimes) == [1] * 10
    for job in jobs:
        stopped = AiRuntimeJob.objects.get(id=job.id)
        assert (stopped.status, stopped.error_code, stopped.retry_count) == ("pending", "RUNTIME_SHUTDOWN", 1)
    breaker = quota_selectors.breaker_get()
    assert (breaker.state, breaker.consecutive_failures) == (CircuitState.CLOSED, 0)


def _platform_tokens_today(api_server: str) -> float:
    text = requests.get(f"{api_server}/metrics", timeout=10).text
    [family] = [f for f in text_string_to_metric_families(text) if f.name == "aijobs_platform_tokens_today"]
    return family.samples[0].value


def test_a_refused_results_tokens_reach_the_users_day_and_the_platforms(api_server, start_runtime, standin, settings):
    # The server checks passwords with Django's default hashers, not the tests' fast MD5.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = UserFactory(password="pw-e2e-123456")
    session = requests.Session()
    login = session.post(f"{api_server}/auth/token", json={"username": user.username, "password": "pw-e2e-123456"})
    session.headers["Authorization"] = f"Bearer {login.json()['access']}"
    assert session.patch(f"{api_server}/ai/settings", json={"aiAnalysisEnabled": True}).status_code == 200
    nonce = uuid.uuid4().hex
    # Long enough to withdraw consent during the call, short of the lease (LEASE_SECONDS: no
    # heartbeat renews it here).
    standin.model.add_faults([{"delay": 1.0, "match": nonce}])
    body = {"jobType": "learning_state_analysis", "targetType": "user", "targetId": public_id_of(user),
            "apiKeyMode": "platform_key", "params": {"case": nonce}}  # fmt: skip
    created = session.post(f"{api_server}/ai/jobs", json=body)
    assert created.status_code == 201, created.text
    # No heartbeat during the call, so the runtime learns of the withdrawn consent from the result's refusal.
    start_runtime("rt-refused", heartbeat_seconds=600)
    wait_for(lambda: standin_requests(standin) >= 1, what="the model call")
    assert session.patch(f"{api_server}/ai/settings", json={"aiAnalysisEnabled": False}).status_code == 200

    done = final(AiRuntimeJob(id=created.json()["jobId"]))
    assert done.status == "cancelled"
    log = wait_for(lambda: AiInvocationLog.objects.filter(job=done).first(), what="the refused call's log")
    assert log.error_code == "JOB_NOT_ACTIVE" and log.total_tokens > 0

    def tokens_used() -> int:
        return session.get(f"{api_server}/ai/profile").json()["usage"]["platform_key"]["tokensUsed"]

    assert wait_for(tokens_used, what="the refused call's tokens on the user's day") == log.total_tokens
    assert _platform_tokens_today(api_server) == log.total_tokens
