"""``usage`` on the user's jobs (contract section 12): every model call of every attempt,
the result's and each invocation log's that carries an ``errorCode``; the list reads it
in its own statement, never a query per job."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ai_jobs.models import AiRuntimeJob
from tests.support.api import RuntimeClient
from tests.support.factories import VALID_OUTPUTS
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def _log(attempt_no: int, request_id: str, prompt: int, completion: int, cost: str, error_code: str | None) -> dict:
    return {
        "attemptNo": attempt_no,
        "requestId": request_id,
        "promptTokens": prompt,
        "completionTokens": completion,
        "totalTokens": prompt + completion,
        "costCents": cost,
        "errorCode": error_code,
    }


def test_a_finished_job_carries_the_sum_of_its_result_and_its_failed_calls():
    learner = Learner()
    runtime = RuntimeClient()
    job_id = learner.job().json()["jobId"]
    assert learner.get(f"/ai/jobs/{job_id}").json()["usage"] == {
        "promptTokens": 0, "completionTokens": 0, "totalTokens": 0, "costCents": 0, "calls": 0,
    }  # fmt: skip

    # Attempt 1: a call that timed out, then a retryable failure.
    assert [job["jobId"] for job in runtime.claim().json()["jobs"]] == [job_id]
    logs = runtime.post(f"jobs/{job_id}/invocation-logs", {"logs": [_log(1, "r1", 100, 0, "0.5", "MODEL_TIMEOUT")]})
    assert logs.status_code == 201
    assert runtime.fail(job_id, 1, "MODEL_RATE_LIMIT").json()["status"] == "pending"
    AiRuntimeJob.objects.filter(id=job_id).update(available_at=AiRuntimeJob.objects.get(id=job_id).created_at)

    # Attempt 2: a call refused by the provider, then the accepted one (its log has no errorCode).
    assert [job["jobId"] for job in runtime.claim().json()["jobs"]] == [job_id]
    result = runtime.result(
        job_id,
        2,
        VALID_OUTPUTS["learning_state_analysis"],
        usage={"promptTokens": 300, "completionTokens": 120, "totalTokens": 420},
        costCents="2.25",
        invocationLogs=[_log(2, "r2", 40, 5, "0.25", "MODEL_NETWORK_ERROR"), _log(2, "r3", 300, 120, "2.25", None)],
    )
    assert result.status_code == 200, result.json()

    expected = {"promptTokens": 440, "completionTokens": 125, "totalTokens": 565, "costCents": 3.0, "calls": 3}
    detail = learner.get(f"/ai/jobs/{job_id}").json()
    assert detail["usage"] == expected
    listed = learner.get("/ai/jobs").json()["results"]
    assert [job["usage"] for job in listed if job["jobId"] == job_id] == [expected]
    assert Decimal(str(detail["usage"]["costCents"])) == Decimal("3.00")


def test_the_job_list_reads_usage_without_a_query_per_job():
    learner = Learner()
    runtime = RuntimeClient()
    for _ in range(3):
        learner.job()
    with CaptureQueriesContext(connection) as three:
        assert len(learner.get("/ai/jobs").json()["results"]) == 3
    for _ in range(7):
        learner.job()
    for job in runtime.claim(limit=10).json()["jobs"]:
        runtime.post(f"jobs/{job['jobId']}/invocation-logs", {"logs": [_log(1, "x", 10, 1, "0.1", "MODEL_TIMEOUT")]})
    with CaptureQueriesContext(connection) as ten:
        results = learner.get("/ai/jobs").json()["results"]
    assert len(results) == 10 and all(job["usage"]["calls"] == 1 for job in results)
    assert len(ten.captured_queries) == len(three.captured_queries)


def test_usage_is_in_the_openapi_schema_with_descriptions(client):
    schema = client.get("/api/schema", HTTP_ACCEPT="application/json").json()
    usage = schema["components"]["schemas"]["JobUsage"]
    assert set(usage["properties"]) == {"promptTokens", "completionTokens", "totalTokens", "costCents", "calls"}
    assert all(field.get("description") for field in usage["properties"].values())
    job = schema["components"]["schemas"]["UserJob"]
    assert "usage" in job["properties"] and "usage" in job["required"]


def test_the_admin_shows_what_a_job_cost_on_its_page():
    learner, runtime = Learner(), RuntimeClient()
    job_id = learner.job().json()["jobId"]
    runtime.claim()
    runtime.post(f"jobs/{job_id}/invocation-logs", {"logs": [_log(1, "r1", 1200, 34, "150", "MODEL_TIMEOUT")]})
    operator = Client()
    operator.force_login(get_user_model().objects.create_superuser("operator", "op@example.com", "pw"))
    page = operator.get(f"/admin/ai_jobs/airuntimejob/{job_id}/change/").content.decode()
    assert "1 call(s) · 1,234 tokens (1,200 + 34) · $1.50" in page
