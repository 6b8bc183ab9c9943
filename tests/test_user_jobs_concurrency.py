"""Many requests at a quota's edge, with real threads against PostgreSQL."""

from __future__ import annotations

from collections import Counter

import pytest

from ai_jobs.models import AiRuntimeJob
from quotas.models import UserAiSettings, UserAiUsage
from tests.support.concurrency import run_together
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _code(response) -> str:
    return "created" if response.status_code == 201 else response.json()["error"]["code"]


def test_50_concurrent_requests_with_3_jobs_left_create_exactly_3():
    learner = Learner()
    UserAiSettings.objects.filter(user=learner.user).update(max_daily_ai_jobs=3)
    outcomes = Counter(run_together(50, lambda i: _code(learner.twin().job())))
    assert outcomes == {"created": 3, "DAILY_JOB_LIMIT_EXCEEDED": 47}
    assert AiRuntimeJob.objects.filter(user=learner.user).count() == 3
    assert UserAiUsage.objects.get(user=learner.user).job_count == 3


def test_20_concurrent_identical_requests_make_one_job():
    learner = Learner()
    responses = run_together(20, lambda i: learner.twin().job(idempotencyKey="same-client-uuid"))
    assert Counter(r.status_code for r in responses) == {201: 1, 200: 19}
    assert len({r.json()["jobId"] for r in responses}) == 1
    assert AiRuntimeJob.objects.filter(user=learner.user).count() == 1
    assert UserAiUsage.objects.get(user=learner.user).job_count == 1


def test_identical_requests_at_the_limit_all_answer_the_one_job_they_made():
    learner = Learner()
    UserAiSettings.objects.filter(user=learner.user).update(max_daily_ai_jobs=1)
    responses = run_together(12, lambda i: learner.twin().job(idempotencyKey="last-one"))
    assert sorted({r.status_code for r in responses}) == [200, 201]
    assert len({r.json()["jobId"] for r in responses}) == 1
    assert UserAiUsage.objects.get(user=learner.user).job_count == 1
