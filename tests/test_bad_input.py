"""Bad input gets the API's error body, never a 500 — and never a half-written row."""

from __future__ import annotations

import base64

import pytest

from ai_jobs.models import AiRuntimeJob
from ai_jobs.services import retry_delay
from asynch.worker.calls import ModelCall, _redacted
from tests.support.api import RuntimeClient, error_code
from tests.support.factories import VALID_OUTPUTS, JobFactory
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def _raw(client, path: str, body: str, method: str = "post"):
    return getattr(client, method)(path, body, content_type="application/json")


@pytest.mark.parametrize("text", ["\\ud800", "\\u0000", "ok\\udfff"])
def test_text_no_database_can_store_is_refused_at_the_door(text):
    learner = Learner()
    body = (
        f'{{"jobType": "learning_state_analysis", "targetType": "user", "targetId": "{learner.user.pk}", '
        f'"params": {{"x": "{text}"}}}}'
    )
    response = _raw(learner.client, "/ai/jobs", body)
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert not AiRuntimeJob.objects.exists()
    profile = _raw(learner.client, "/ai/learning-profile", f'{{"goals": "g", "preferences": {{"{text}": 1}}}}', "put")
    assert profile.status_code == 400
    assert learner.get("/ai/learning-profile").status_code == 200
    runtime = RuntimeClient("runtime-1")
    job = JobFactory()
    runtime.lock(job.id)
    result = _raw(
        runtime.client,
        f"/internal/runtime/jobs/{job.id}/result",
        f'{{"attemptNo": 1, "output": {{"summary": "{text}"}}}}',
    )
    assert result.status_code == 400
    assert runtime.post("jobs/poll", {"capabilities": ["learning_state_analysis"]}).status_code == 200


def test_a_tampered_cursor_is_a_validation_error():
    learner = Learner()
    learner.job()
    for cursor in (base64.b64encode(b"o=0&r=0&p=garbage").decode(), base64.b64encode(b"p=2026-13-45").decode()):
        for path in ("/ai/jobs", "/ai/notifications", "/learning/knowledge-bases", "/ai/model-credentials"):
            response = learner.get(path, cursor=cursor)
            assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR", (path, cursor)


def test_numbers_past_their_columns_are_validation_errors(runtime):
    job = JobFactory()
    runtime.lock(job.id)
    assert runtime.fail(job.id, 10**7, "MODEL_TIMEOUT").status_code == 400
    too_long = runtime.post(f"jobs/{job.id}/invocation-logs", {"logs": [{"attemptNo": 1, "latencyMs": 10**30}]})
    assert too_long.status_code == 400
    usage = runtime.result(job.id, 1, VALID_OUTPUTS["learning_state_analysis"], usage={"promptTokens": 10**30})
    assert usage.status_code == 400
    assert runtime.result(job.id, 1, VALID_OUTPUTS["learning_state_analysis"]).status_code == 200
    assert retry_delay(10**7).total_seconds() <= 300  # the backoff is capped before it is computed


def test_a_nul_in_the_path_or_the_query_is_refused():
    learner = Learner()
    assert learner.get("/ai/jobs/job_a\x00b").status_code == 404
    response = learner.get("/ai/quizzes", jobId="a\x00b", targetType="user")
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert response.json()["error"]["fields"] == {"jobId": ["Must not contain NUL characters."]}  # named as on the wire


def test_a_study_record_from_year_one_is_refused():
    learner = Learner()
    kb = learner.client.post("/learning/knowledge-bases", {"name": "kb"}, format="json").json()
    point = learner.client.post(
        "/learning/knowledge-points", {"knowledgeBaseId": kb["id"], "name": "p"}, format="json"
    ).json()
    body = {"knowledgePointId": point["id"], "isCorrect": True, "studiedAt": "0001-01-01T00:00:00Z"}
    response = learner.client.post("/learning/study-records", body, format="json")
    assert response.status_code == 400 and "studiedAt" in response.json()["error"]["fields"]


def test_a_body_that_is_not_an_object_names_non_field_errors_in_camel_case():
    learner = Learner()
    response = learner.client.post("/ai/jobs", [1, 2], format="json")
    assert response.status_code == 400 and "nonFieldErrors" in response.json()["error"]["fields"]


def test_a_body_of_json_null_is_no_data_provided_on_every_api():
    learner = Learner()
    for client, path in (
        (learner.client, "/ai/jobs"),
        (RuntimeClient("runtime-1").client, "/internal/runtime/jobs/claim"),
    ):
        response = _raw(client, path, "null")
        assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR", response.content
        assert response.json()["error"]["fields"] == {"nonFieldErrors": ["No data provided"]}


def test_an_error_body_shown_to_a_tenant_never_carries_the_configured_key():
    call = ModelCall(
        model_name="m", url="http://x", http_method="POST", headers={"Authorization": "Bearer sk-secret-123"},
        timeout_seconds=1, max_concurrency=1,
    )  # fmt: skip
    shown = _redacted('{"error": "invalid key Bearer sk-secret-123"}\x00', call)
    assert "sk-secret-123" not in shown and "\x00" not in shown and "****" in shown
