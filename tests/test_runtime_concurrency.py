"""Runtimes racing for the same jobs, with real threads against PostgreSQL."""

from __future__ import annotations

from collections import Counter

import pytest

from accounts.selectors import public_id_of
from ai_jobs.models import AiRuntimeJob
from tests.support.api import RuntimeClient
from tests.support.concurrency import run_together
from tests.support.factories import UserFactory, consent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _pending_jobs(count: int) -> list[str]:
    user = UserFactory()
    consent(user)
    jobs = AiRuntimeJob.objects.bulk_create(
        AiRuntimeJob(user=user, job_type="learning_state_analysis", target_type="user", target_id=public_id_of(user))
        for _ in range(count)
    )
    return [job.id for job in jobs]


def test_32_runtimes_locking_one_job_exactly_one_wins():
    (job_id,) = _pending_jobs(1)

    def lock(i: int) -> tuple[int, str | None]:
        response = RuntimeClient(f"runtime-{i}").lock(job_id)
        return response.status_code, (response.json().get("error") or {}).get("code")

    outcomes = Counter(run_together(32, lock))
    assert outcomes == {(200, None): 1, (409, "JOB_ALREADY_LOCKED"): 31}
    job = AiRuntimeJob.objects.get(id=job_id)
    assert job.status == "locked" and job.attempt_no == 1


def test_8_runtimes_claiming_1000_jobs_lock_each_exactly_once():
    job_ids = _pending_jobs(1000)

    def claim_all(i: int) -> list[str]:
        runtime = RuntimeClient(f"runtime-{i}")
        mine: list[str] = []
        while True:
            response = runtime.claim(limit=10)
            assert response.status_code == 200, response.content
            batch = response.json()["jobs"]
            if not batch:
                return mine
            assert all(job["status"] == "locked" for job in batch)
            mine.extend(job["jobId"] for job in batch)

    claimed = run_together(8, claim_all)
    every = [job_id for mine in claimed for job_id in mine]
    assert len(every) == len(set(every)) == 1000
    assert set(every) == set(job_ids)
    assert sum(1 for mine in claimed if mine) > 1  # they really raced
    holders = dict(AiRuntimeJob.objects.values_list("id", "locked_by"))
    for i, mine in enumerate(claimed):
        assert all(holders[job_id] == f"runtime-{i}" for job_id in mine)
    assert set(AiRuntimeJob.objects.values_list("status", "attempt_no").distinct()) == {("locked", 1)}


def test_concurrent_results_for_one_job_store_one_result():
    (job_id,) = _pending_jobs(1)
    runtime = RuntimeClient("runtime-1")
    assert runtime.lock(job_id).status_code == 200
    output = {
        "summary": "ok",
        "masteryScore": 50,
        "level": "developing",
        "strengths": [],
        "weaknesses": [],
        "confidence": 0.5,
    }

    def submit(i: int) -> tuple[int, bool | None]:
        response = RuntimeClient("runtime-1").result(job_id, 1, output)
        return response.status_code, response.json().get("duplicate")

    outcomes = Counter(run_together(10, submit))
    assert outcomes == {(200, False): 1, (200, True): 9}
