"""The circuit breaker protects the provider, not only admission: while
open, claim, poll and lock pass over platform-key jobs; while half-open at most
``PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS`` of them are locked/running at once, however
many runtimes claim together. User-key jobs are never held back."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection

from ai_jobs.models import AiRuntimeJob
from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import CircuitState
from tests.support.api import RuntimeClient, error_code
from tests.support.breaker import breaker_half_open, breaker_open
from tests.support.factories import VALID_OUTPUTS, JobFactory
from tests.support.user_api import Learner


def _ids(response) -> list[str]:
    assert response.status_code == 200, response.json()
    return [job["jobId"] for job in response.json()["jobs"]]


@pytest.mark.django_db
def test_while_open_a_platform_job_queued_before_is_not_claimed_and_a_user_key_job_is(runtime):
    learner = Learner()
    platform = learner.job().json()["jobId"]
    user_key = learner.job(apiKeyMode="user_deepseek_key", credentialId=learner.credential()).json()["jobId"]
    breaker_open()
    polled = runtime.post("jobs/poll", {"capabilities": ["learning_state_analysis"], "limit": 10})
    assert _ids(polled) == [user_key]
    assert _ids(runtime.claim()) == [user_key]
    locked = runtime.lock(platform)
    assert locked.status_code == 409 and error_code(locked) == "JOB_NOT_ACTIVE"
    assert "circuit breaker is open" in locked.json()["error"]["message"]
    assert AiRuntimeJob.objects.get(id=platform).status == "pending"  # it waits, nothing lost
    # Closed again, it is handed out.
    quotas.breaker_transition(to=CircuitState.CLOSED, actor="operator", reason="the provider is back")
    assert _ids(runtime.claim()) == [platform]


@pytest.mark.django_db
def test_while_half_open_at_most_the_trial_number_of_platform_jobs_run(runtime, other_runtime, settings):
    settings.PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS = 2
    waiting = [JobFactory().id for _ in range(5)]
    user_key = JobFactory(api_key_mode="user_deepseek_key", credential_id="cred_x").id
    breaker_half_open()
    assert len(_ids(runtime.post("jobs/poll", {"capabilities": ["learning_state_analysis"], "limit": 10}))) == 3
    first = _ids(runtime.claim(limit=10))
    assert user_key in first and len(first) == 3  # the user-key job and two trial jobs
    trials = [job_id for job_id in first if job_id != user_key]
    assert _ids(other_runtime.claim(limit=10)) == []
    third = next(job_id for job_id in waiting if job_id not in trials)
    refused = other_runtime.lock(third)
    assert refused.status_code == 409 and "half-open" in refused.json()["error"]["message"]
    # A trial ends (a failure reopens it, a success closes it): a trial that ended frees its place.
    runtime.heartbeat(trials[0])
    assert runtime.fail(trials[0], 1, "INVALID_SNAPSHOT").json()["status"] == "failed"  # not a model failure
    assert quota_selectors.breaker_get().state == CircuitState.HALF_OPEN
    assert len(_ids(other_runtime.claim(limit=10))) == 1
    assert AiRuntimeJob.objects.filter(api_key_mode="platform_key", status__in=["locked", "running"]).count() == 2
    # One success closes the breaker: the rest run as usual.
    assert runtime.result(trials[1], 1, VALID_OUTPUTS["learning_state_analysis"]).status_code == 200
    assert quota_selectors.breaker_get().state == CircuitState.CLOSED
    assert len(_ids(runtime.claim(limit=10))) == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_sixteen_runtimes_claiming_and_locking_at_once_while_half_open_run_no_more_than_the_trial_number(settings):
    settings.PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS = 2
    platform = [JobFactory().id for _ in range(40)]
    user_key = [JobFactory(api_key_mode="user_deepseek_key", credential_id="cred_x").id for _ in range(20)]
    breaker_half_open()
    barrier = threading.Barrier(16)
    got: list[str] = []
    outcomes: Counter[int] = Counter()
    lock = threading.Lock()

    def runtime_thread(index: int) -> None:
        try:
            claim_and_lock(index)
        finally:
            connection.close()

    def claim_and_lock(index: int) -> None:
        client = RuntimeClient(f"runtime-{index}")
        barrier.wait()
        for _ in range(3):
            if index % 2:
                ids = _ids(client.claim(limit=3))
            else:  # half of them lock named platform jobs, as a runtime of the first protocol would
                target = platform[(index * 3 + _) % len(platform)]
                response = client.lock(target)
                ids = [target] if response.status_code == 200 else []
                with lock:
                    outcomes[response.status_code] += 1
            with lock:
                got.extend(ids)

    threads = [threading.Thread(target=runtime_thread, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    running_platform = [job_id for job_id in got if job_id in platform]
    assert len(running_platform) == 2, running_platform
    assert len(got) == len(set(got))  # no job twice
    assert AiRuntimeJob.objects.filter(api_key_mode="platform_key", status="locked").count() == 2
    assert set(user_key) <= set(got)  # user-key jobs were never held back
    assert outcomes[409] >= 1
