"""The internal runtime API through HTTP: authentication, poll, snapshot and
credential, results, invocation logs and every internal error code in the situation
that gives it. The transitions themselves and their refusals are tests/test_transitions.py's."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from accounts.selectors import public_id_of
from ai_jobs.models import AiInvocationLog, AiRuntimeJob, AiRuntimeResult
from tests.support.api import ALL_TYPES, RuntimeClient, error_code
from tests.support.factories import VALID_OUTPUTS, JobFactory

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def _locked(runtime: RuntimeClient, **job_fields) -> AiRuntimeJob:
    job = JobFactory(**job_fields)
    assert runtime.lock(job.id).status_code == 200
    return AiRuntimeJob.objects.get(id=job.id)


# --- authentication ---------------------------------------------------------------


def test_internal_api_needs_a_runtime_token(runtime):
    job = JobFactory()
    anonymous = RuntimeClient("x", token="")
    anonymous.client.credentials(HTTP_X_RUNTIME_INSTANCE_ID="x")
    response = anonymous.lock(job.id)
    assert response.status_code == 401 and error_code(response) == "UNAUTHORIZED"
    wrong = RuntimeClient("x", token="not-a-token")
    assert error_code(wrong.lock(job.id)) == "UNAUTHORIZED"


def test_x_internal_api_key_and_a_rotated_second_token_both_work():
    job = JobFactory()
    client = RuntimeClient("runtime-9")
    client.client.credentials(
        HTTP_X_INTERNAL_API_KEY="test-runtime-token-next-0123456789abcdef", HTTP_X_RUNTIME_INSTANCE_ID="runtime-9"
    )
    assert client.lock(job.id).status_code == 200


def test_a_call_that_acts_on_a_job_needs_the_instance_header(runtime):
    job = JobFactory()
    runtime.client.credentials(HTTP_AUTHORIZATION="Bearer test-runtime-token-0123456789abcdef")
    response = runtime.lock(job.id)
    assert response.status_code == 400
    body = response.json()["error"]
    assert body["code"] == "VALIDATION_ERROR" and "x-runtime-instance-id" in body["fields"]


# --- poll -------------------------------------------------------------------------


def test_poll_returns_due_pending_jobs_of_the_capabilities_in_queue_order(runtime):
    now = timezone.now()
    late = JobFactory(priority=5, created_at=now - dt.timedelta(minutes=10))
    first = JobFactory(priority=0, created_at=now - dt.timedelta(minutes=1))
    second = JobFactory(priority=0, created_at=now)
    JobFactory(job_type="quiz_generation", target_type="knowledge_base")  # not a capability
    JobFactory(available_at=now + dt.timedelta(minutes=5))  # backing off
    JobFactory(status="cancelled")
    response = runtime.post("jobs/poll", {"capabilities": ["learning_state_analysis"], "limit": 10})
    assert response.status_code == 200
    assert [j["jobId"] for j in response.json()["jobs"]] == [first.id, second.id, late.id]
    job = response.json()["jobs"][0]
    assert set(job) == {
        "jobId", "jobType", "targetType", "targetId", "userId", "status", "priority", "apiKeyMode", "credentialId",
        "modelProvider", "modelName", "promptVersion", "outputSchemaVersion", "attemptNo", "retryCount",
        "maxRetryCount", "timeoutSeconds", "params", "lockUntil", "createdAt",
    }  # fmt: skip
    assert job["status"] == "pending" and job["lockUntil"] is None


def test_poll_clamps_the_limit_to_50_and_returns_an_empty_list_when_idle(runtime):
    assert runtime.post("jobs/poll", {"capabilities": ALL_TYPES}).json() == {"jobs": []}
    JobFactory.create_batch(55)
    assert len(runtime.post("jobs/poll", {"capabilities": ALL_TYPES, "limit": 500}).json()["jobs"]) == 50


def test_an_unknown_capability_matches_nothing_instead_of_failing_the_poll(runtime):
    # A newer runtime against an older server still gets the types both know.
    job = JobFactory()
    response = runtime.post("jobs/poll", {"capabilities": ["astrology"]})
    assert response.status_code == 200 and response.json() == {"jobs": []}
    both = runtime.post("jobs/poll", {"capabilities": ["astrology", "learning_state_analysis"]})
    assert both.status_code == 200 and [j["jobId"] for j in both.json()["jobs"]] == [job.id]
    claimed = runtime.claim(["astrology", "learning_state_analysis"])
    assert [j["jobId"] for j in claimed.json()["jobs"]] == [job.id]
    assert runtime.post("jobs/poll", {"capabilities": []}).status_code == 400  # an empty list is still bad input


# --- snapshot and credential -----------------------------------------------------------


def test_snapshot_is_built_when_missing_and_rebuilt_when_expired(runtime):
    job = _locked(runtime)
    first = runtime.get(f"jobs/{job.id}/snapshot")
    assert first.status_code == 200
    body = first.json()
    assert body["jobId"] == job.id and body["targetType"] == "user" and body["schemaVersion"] == "v1"
    assert body["data"]["learner"] == {"userId": public_id_of(job.user)} == {"userId": body["userId"]}
    assert runtime.get(f"jobs/{job.id}/snapshot").json()["snapshotId"] == body["snapshotId"]
    job.refresh_from_db()
    type(job.snapshot).objects.filter(id=job.snapshot_id).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    rebuilt = runtime.get(f"jobs/{job.id}/snapshot").json()
    assert rebuilt["snapshotId"] != body["snapshotId"]


def test_snapshot_and_credential_are_only_for_the_lock_holder(runtime, other_runtime):
    job = _locked(runtime)
    assert error_code(other_runtime.get(f"jobs/{job.id}/snapshot")) == "JOB_NOT_ACTIVE"
    assert error_code(other_runtime.post(f"jobs/{job.id}/credential")) == "JOB_NOT_ACTIVE"
    assert error_code(runtime.get("jobs/job_missing/snapshot")) == "JOB_NOT_FOUND"


def test_credential_resolves_the_platform_key_for_the_holder(runtime, settings):
    job = _locked(runtime)
    response = runtime.post(f"jobs/{job.id}/credential")
    assert response.status_code == 200
    assert response.json() == {
        "apiKeyMode": "platform_key",
        "provider": "deepseek",
        "baseUrl": settings.DEEPSEEK_BASE_URL,
        "modelName": job.model_name,
        "apiKey": "sk-platform-test-key",
    }
    assert response["Cache-Control"] == "no-store"


def test_credential_of_a_user_key_job_without_credential_is_required_else_not_found(runtime):
    job = _locked(runtime, api_key_mode="user_deepseek_key")
    response = runtime.post(f"jobs/{job.id}/credential")
    assert response.status_code == 400 and error_code(response) == "CREDENTIAL_REQUIRED"
    job = _locked(runtime, api_key_mode="user_deepseek_key", credential_id="cred_gone")
    response = runtime.post(f"jobs/{job.id}/credential")
    assert response.status_code == 404 and error_code(response) == "CREDENTIAL_NOT_FOUND"


# --- result -------------------------------------------------------------------------


@pytest.mark.parametrize("job_type", ALL_TYPES)
def test_a_valid_result_of_each_job_type_succeeds_the_job(runtime, job_type):
    target = "knowledge_base" if job_type in ("quiz_generation", "flashcard_generation") else "user"
    job = _locked(runtime, job_type=job_type, target_type=target)
    runtime.heartbeat(job.id)
    response = runtime.result(
        job.id, 1, VALID_OUTPUTS[job_type], usage={"promptTokens": 100, "completionTokens": 20}, costCents="0.0421"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "succeeded" and body["duplicate"] is False and body["jobId"] == job.id
    job.refresh_from_db()
    assert job.status == "succeeded" and job.finished_at is not None and job.lock_until is None
    result = AiRuntimeResult.objects.get(job=job)
    assert result.id == body["resultId"] and result.total_tokens == 120 and str(result.cost_cents) == "0.0421"


def test_the_same_result_again_is_a_duplicate_and_a_different_one_conflicts(runtime):
    job = _locked(runtime)
    output = VALID_OUTPUTS["learning_state_analysis"]
    first = runtime.result(job.id, 1, output).json()
    again = runtime.result(job.id, 1, dict(reversed(list(output.items()))))  # same canonical JSON
    assert again.status_code == 200 and again.json() == {**first, "duplicate": True}
    different = runtime.result(job.id, 1, {**output, "summary": "Something else"})
    assert different.status_code == 409 and error_code(different) == "RESULT_ALREADY_EXISTS"
    assert AiRuntimeResult.objects.filter(job=job).count() == 1


def test_a_result_that_misses_its_schema_or_names_an_unknown_version_is_422(runtime):
    job = _locked(runtime)
    bad = runtime.result(job.id, 1, {"summary": "no score"})
    assert bad.status_code == 422 and error_code(bad) == "RESULT_SCHEMA_UNSUPPORTED"
    assert "masteryScore" in bad.json()["error"]["message"]
    unknown = runtime.result(job.id, 1, VALID_OUTPUTS["learning_state_analysis"], outputSchemaVersion="v9")
    assert unknown.status_code == 422 and error_code(unknown) == "RESULT_SCHEMA_UNSUPPORTED"
    job.refresh_from_db()
    assert job.status == "locked" and not AiRuntimeResult.objects.filter(job=job).exists()


def test_a_result_body_that_is_not_an_object_is_a_validation_error(runtime):
    job = _locked(runtime)
    response = runtime.post(f"jobs/{job.id}/result", {"attemptNo": "one", "output": [1, 2]})
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {"attemptNo", "output"}
    malformed = runtime.client.post(
        f"/internal/runtime/jobs/{job.id}/result", "{not json", content_type="application/json"
    )
    assert malformed.status_code == 400 and error_code(malformed) == "VALIDATION_ERROR"


# --- invocation logs ---------------------------------------------------------------------


def test_invocation_logs_are_stored_once_even_when_sent_twice(runtime):
    job = _locked(runtime)
    log = {"attemptNo": 1, "provider": "deepseek", "modelName": "deepseek-chat", "requestId": "req-1",
           "startedAt": timezone.now().isoformat(), "latencyMs": 812, "httpStatus": 200, "promptTokens": 10,
           "completionTokens": 5, "totalTokens": 15, "costCents": "0.001", "errorCode": None}  # fmt: skip
    for _ in range(2):
        response = runtime.post(f"jobs/{job.id}/invocation-logs", {"logs": [log]})
        assert response.status_code == 201 and response.json() == {"accepted": 1}
    stored = AiInvocationLog.objects.get(job=job)
    assert stored.latency_ms == 812 and stored.runtime_instance_id == "runtime-1"


def test_invocation_logs_for_an_attempt_that_never_was_are_refused(runtime):
    job = _locked(runtime)
    response = runtime.post(f"jobs/{job.id}/invocation-logs", {"logs": [{"attemptNo": 3}]})
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert error_code(runtime.post("jobs/job_missing/invocation-logs", {"logs": [{"attemptNo": 1}]})) == "JOB_NOT_FOUND"


# --- errors -----------------------------------------------------------------------------


def test_an_unknown_path_answers_the_api_error_body(client):
    response = client.get("/internal/runtime/nothing-here")
    assert response.status_code == 404 and error_code(response) == "NOT_FOUND"


def test_a_wrong_method_answers_405_in_the_error_body_shape(runtime):
    response = runtime.get("jobs/claim")
    assert response.status_code == 405 and error_code(response) == "METHOD_NOT_ALLOWED"


def test_a_body_past_the_upload_limit_is_a_validation_error_not_a_500(runtime, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    job = _locked(runtime)
    response = runtime.result(job.id, 1, {"summary": "x" * 20_000})
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert "body" in response.json()["error"]["fields"]


def test_a_body_that_is_not_json_is_415_in_the_error_body_shape(runtime):
    response = runtime.client.post("/internal/runtime/jobs/poll", "capabilities=all", content_type="text/plain")
    assert response.status_code == 415 and error_code(response) == "UNSUPPORTED_MEDIA_TYPE"


def test_snapshot_not_found_is_never_answered_a_missing_snapshot_is_rebuilt(runtime):
    job = _locked(runtime)
    first = runtime.get(f"jobs/{job.id}/snapshot").json()["snapshotId"]
    type(job).objects.filter(id=job.id).update(snapshot=None)
    response = runtime.get(f"jobs/{job.id}/snapshot")
    assert response.status_code == 200 and response.json()["snapshotId"] != first
