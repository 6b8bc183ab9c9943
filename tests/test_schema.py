"""The OpenAPI schema and docs of contract §1."""

import os
import subprocess
import sys
import threading

import pytest
import requests

from tests.fault_fixtures import free_port, port_open, stop_process
from tests.fault_stack import ROOT, wait_until

pytestmark = pytest.mark.django_db


def test_the_schema_lists_every_internal_endpoint(client):
    response = client.get("/api/schema", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in ("poll", "claim", "{job_id}/lock", "{job_id}/heartbeat", "{job_id}/snapshot", "{job_id}/credential",
                 "{job_id}/result", "{job_id}/fail", "{job_id}/invocation-logs"):  # fmt: skip
        assert f"/internal/runtime/jobs/{path}" in paths


def test_the_docs_page_is_served(client):
    response = client.get("/api/docs")
    assert response.status_code == 200 and b"swagger" in response.content.lower()


def test_the_schema_is_valid_openapi_without_a_single_warning(tmp_path):
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert (tmp_path / "schema.yaml").read_text().startswith("openapi: 3")


@pytest.mark.slow
def test_concurrent_first_schema_requests_to_a_fresh_gunicorn_worker_all_succeed(tmp_path):
    """drf-spectacular's generator is not thread-safe: without the view's lock, eight
    threads of a cold worker asking at once get 500s (seen on every try here)."""
    port = free_port()
    env = {**os.environ, "VAR_DIR": str(tmp_path), "LOG_LEVEL": "CRITICAL"}
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1",
         "--threads", "8", "--log-level", "critical"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: port_open(port), timeout=60, every=0.05, what="gunicorn")
        barrier, statuses = threading.Barrier(8), []

        def ask() -> None:
            barrier.wait()
            statuses.append(requests.get(f"http://127.0.0.1:{port}/api/schema", timeout=60).status_code)

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        stop_process(server)
    assert statuses == [200] * 8


def _schema(client) -> dict:
    return client.get("/api/schema", HTTP_ACCEPT="application/json").json()


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def test_every_operation_documents_its_errors_with_the_error_body_and_their_codes(client):
    schema = _schema(client)
    error = schema["components"]["schemas"]["Error"]
    assert error["required"] == ["error"] and set(error["properties"]["error"]["required"]) == {
        "code",
        "message",
        "retryable",
    }
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            for status in ("400", "503"):
                assert status in responses, (method, path, status)
            if path.startswith(("/ai/", "/internal/", "/learning/")):
                assert {"401", "429"} <= set(responses), (method, path)
            if "{" in path:
                assert "404" in responses, (method, path)

    def codes(path: str, method: str, status: str) -> set[str]:
        body = schema["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
        assert body["allOf"][0] == {"$ref": "#/components/schemas/Error"}
        return set(body["allOf"][1]["properties"]["error"]["properties"]["code"]["enum"])

    assert codes("/ai/jobs", "post", "400") >= {"VALIDATION_ERROR", "INVALID_JOB_TYPE", "AI_ANALYSIS_DISABLED",
                                                 "PLATFORM_TOKEN_BUDGET_EXCEEDED", "DAILY_JOB_LIMIT_EXCEEDED"}  # fmt: skip
    assert codes("/ai/jobs", "post", "503") == {
        "PLATFORM_CIRCUIT_OPEN",
        "PLATFORM_CIRCUIT_HALF_OPEN",
        "SERVICE_UNAVAILABLE",
    }
    assert codes("/internal/runtime/jobs/{job_id}/lock", "post", "409") == {"JOB_NOT_ACTIVE", "JOB_ALREADY_LOCKED"}
    assert codes("/internal/runtime/jobs/{job_id}/result", "post", "422") == {"RESULT_SCHEMA_UNSUPPORTED"}
    assert codes("/task/createTask", "post", "429") == {"QUEUE_LIMIT_EXCEEDED"}
    for kind in ("knowledge-bases", "materials", "knowledge-points", "study-records"):
        assert codes(f"/learning/{kind}", "post", "409") == {"LEARNING_LIMIT_EXCEEDED"}
        assert "409" not in schema["paths"][f"/learning/{kind}"]["get"]["responses"]
    assert "Retry-After" in schema["paths"]["/ai/jobs"]["get"]["responses"]["429"]["headers"]


@pytest.mark.parametrize(
    "path", ["/ai/jobs", "/model/listModels", "/model/stats", "/ai/analyses", "/ai/model-credentials"]
)
def test_list_endpoints_are_documented_as_the_results_and_next_envelope(client, path):
    schema = _schema(client)
    page = _resolve(schema, schema["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"])
    assert page["type"] == "object" and set(page["properties"]) == {"results", "next"}
    assert page["properties"]["results"]["type"] == "array" and page["properties"]["next"]["nullable"] is True
    names = {parameter["name"] for parameter in schema["paths"][path]["get"].get("parameters", [])}
    assert {"cursor", "limit"} <= names


def test_nullable_fields_are_documented_nullable(client):
    schema = _schema(client)
    profile = schema["components"]["schemas"]["LearningProfile"]
    assert profile["properties"]["updatedAt"]["nullable"] is True  # a profile never saved
    assert "userId" in schema["components"]["schemas"]["AiProfile"]["properties"]
    assert "/auth/register" in schema["paths"] and "delete" in schema["paths"]["/ai/learning-profile"]
    for path in ("/auth/logout", "/auth/password"):  # a session's end: no body, or why not
        assert {"204", "400", "401", "429"} <= set(schema["paths"][path]["post"]["responses"]), path
    assert schema["components"]["schemas"]["Rotated"]["required"] == ["access", "refresh"]
