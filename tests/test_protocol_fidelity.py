"""The protocol to the letter where a runtime or a client relies on it: the first
runtime protocol's failure codes, every model call counted, the learning profile's
DELETE. (The platform budget's own codes: ``test_budget.py``.)"""

from __future__ import annotations

import datetime as dt
import threading
from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone

from ai_jobs.models import AiInvocationLog, AiRuntimeJob
from quotas import selectors as quota_selectors
from quotas.models import UserAiUsage
from tests.support.api import RuntimeClient, error_code
from tests.support.factories import VALID_OUTPUTS, JobFactory
from tests.support.user_api import Learner

pytestmark = pytest.mark.django_db


# --- the first runtime protocol's failure codes ------------------------------------------------


@pytest.mark.parametrize(
    "code, status, retries",
    [
        ("NETWORK_ERROR", "pending", 1),
        ("TEMPORARY_PROVIDER_ERROR", "pending", 1),
        ("INVALID_SCHEMA", "failed", 0),
        ("INVALID_CREDENTIAL", "failed", 0),
    ],
)
def test_seed_000_failure_codes_are_accepted_with_seed_000s_retryable_column(runtime, code, status, retries):
    job = JobFactory()
    lock = runtime.lock(job.id).json()
    response = runtime.fail(job.id, lock["attemptNo"], code, "from a runtime written against the first protocol")
    assert response.status_code == 200, response.json()
    assert response.json() == {"jobId": job.id, "status": status, "retryCount": retries}
    stored = AiRuntimeJob.objects.get(id=job.id)
    assert (stored.status, stored.error_code) == (status, code)  # the job keeps the code sent


# --- every model call counts ----------------------------------------------------------------------


def _log(request_id: str, *, tokens: int, cents: str, error: str | None, attempt: int = 1) -> dict:
    return {
        "attemptNo": attempt,
        "provider": "deepseek",
        "modelName": "deepseek-chat",
        "requestId": request_id,
        "promptTokens": tokens - 10,
        "completionTokens": 10,
        "totalTokens": tokens,
        "costCents": cents,
        "errorCode": error,
    }


def _usage(user, mode: str = "platform_key") -> tuple[int, Decimal]:
    row = UserAiUsage.objects.filter(user=user, api_key_mode=mode).first()
    return (row.tokens_used, row.cost_cents) if row else (0, Decimal(0))


def test_failed_calls_count_against_the_users_and_the_platforms_day_and_the_accepted_one_once(runtime):
    learner = Learner()
    job_id = learner.job().json()["jobId"]
    attempt = runtime.lock(job_id).json()["attemptNo"]
    logs = [
        _log("req-1", tokens=300, cents="0.9", error="MODEL_JSON_PARSE_FAILED"),
        _log("req-2", tokens=200, cents="0.6", error="MODEL_RESPONSE_INVALID"),
    ]
    assert runtime.post(f"jobs/{job_id}/invocation-logs", {"logs": logs}).status_code == 201
    assert _usage(learner.user) == (500, Decimal("1.5"))
    assert quota_selectors.platform_usage_today().tokens_used == 500
    # The accepted call: its tokens count through the result, and its log (no errorCode) adds nothing.
    usage = {"promptTokens": 900, "completionTokens": 100}
    result = runtime.result(job_id, attempt, VALID_OUTPUTS["learning_state_analysis"], usage=usage, costCents="3")
    assert result.status_code == 200
    accepted = _log("req-3", tokens=1000, cents="3", error=None)
    assert runtime.post(f"jobs/{job_id}/invocation-logs", {"logs": [accepted]}).status_code == 201
    assert _usage(learner.user) == (1500, Decimal("4.5"))
    assert quota_selectors.platform_usage_today().tokens_used == 1500
    assert learner.get("/ai/profile").json()["usage"]["platform_key"]["tokensUsed"] == 1500


def test_a_log_resent_is_counted_once(runtime):
    learner = Learner()
    job_id = learner.job().json()["jobId"]
    runtime.lock(job_id)
    body = {"logs": [_log("req-1", tokens=300, cents="1", error="MODEL_TIMEOUT")]}
    for _ in range(3):
        assert runtime.post(f"jobs/{job_id}/invocation-logs", body).status_code == 201
    assert AiInvocationLog.objects.count() == 1
    assert _usage(learner.user) == (300, Decimal(1)) and quota_selectors.platform_usage_today().tokens_used == 300


@pytest.mark.django_db(transaction=True)
def test_a_log_resent_by_eight_threads_at_once_is_counted_once():
    learner = Learner()
    job_id = learner.job().json()["jobId"]
    RuntimeClient("runtime-1").lock(job_id)
    body = {
        "logs": [
            _log("req-1", tokens=300, cents="1", error="MODEL_TIMEOUT"),
            _log("req-2", tokens=50, cents="0", error=None),
        ]
    }
    barrier, statuses = threading.Barrier(8), []

    def send() -> None:
        try:
            client = RuntimeClient("runtime-1")
            barrier.wait()
            statuses.append(client.post(f"jobs/{job_id}/invocation-logs", body).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert statuses == [201] * 8 and AiInvocationLog.objects.count() == 2
    assert _usage(learner.user) == (300, Decimal(1))


def test_a_user_key_jobs_failed_calls_count_for_the_user_not_the_platform(runtime):
    learner = Learner()
    credential = learner.credential()
    job_id = learner.job(apiKeyMode="user_deepseek_key", credentialId=credential).json()["jobId"]
    runtime.lock(job_id)
    logs = [_log("req-1", tokens=400, cents="2", error="MODEL_RATE_LIMIT")]
    assert runtime.post(f"jobs/{job_id}/invocation-logs", {"logs": logs}).status_code == 201
    assert _usage(learner.user, "user_deepseek_key") == (400, Decimal(2))
    assert quota_selectors.platform_usage_today().tokens_used == 0


def test_failed_calls_count_on_the_day_the_job_was_counted(runtime):
    learner = Learner()
    job_id = learner.job().json()["jobId"]
    yesterday = timezone.now().date() - dt.timedelta(days=1)
    AiRuntimeJob.objects.filter(id=job_id).update(quota_date=yesterday)
    runtime.lock(job_id)
    runtime.post(f"jobs/{job_id}/invocation-logs", {"logs": [_log("r", tokens=70, cents="0", error="MODEL_TIMEOUT")]})
    assert UserAiUsage.objects.get(user=learner.user, local_date=yesterday).tokens_used == 70


def test_spending_the_budget_on_failed_calls_refuses_the_next_job(runtime, settings):
    settings.AI_DEFAULT_MAX_DAILY_TOKEN_BUDGET = 1000
    learner = Learner()
    job_id = learner.job().json()["jobId"]
    runtime.lock(job_id)
    runtime.post(f"jobs/{job_id}/invocation-logs", {"logs": [_log("r", tokens=1000, cents="0", error="MODEL_TIMEOUT")]})
    refused = learner.job()
    assert refused.status_code == 400 and error_code(refused) == "DAILY_TOKEN_BUDGET_EXCEEDED"


# --- the learning profile's DELETE -----------------------------------------------------------------


def test_delete_learning_profile_forgets_it_and_the_next_snapshot_has_none(runtime):
    learner = Learner()
    profile = {"goals": "Pass algebra", "level": "beginner", "preferredStudyTime": "evening", "preferences": {"a": 1}}
    saved = learner.client.put("/ai/learning-profile", profile, format="json").json()
    assert saved["goals"] == "Pass algebra" and saved["updatedAt"] is not None
    deleted = learner.client.delete("/ai/learning-profile")
    assert deleted.status_code == 204 and deleted.content == b""
    empty = learner.get("/ai/learning-profile").json()
    assert empty == {"goals": "", "level": "", "preferredStudyTime": "", "preferences": {}, "updatedAt": None}
    assert learner.client.delete("/ai/learning-profile").status_code == 204  # again: nothing to forget
    job_id = learner.job().json()["jobId"]
    runtime.lock(job_id)
    assert runtime.get(f"jobs/{job_id}/snapshot").json()["data"]["profile"]["goals"] == ""
