"""The OpenAPI schema (``/api/schema``) and its docs pages."""

import os
import subprocess
import sys
import threading

import pytest
import requests

from tests.support.fault_fixtures import free_port, port_open, stop_process
from tests.support.fault_stack import ROOT, wait_until

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


# --- what a generated client is built from (the generated-client test drives them live) ---------


def _body(schema: dict, path: str, method: str) -> dict:
    return _resolve(schema, schema["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"])


def _answer(schema: dict, path: str, method: str, status: str = "200") -> dict:
    content = schema["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
    return _resolve(schema, content)


def test_update_model_is_documented_as_a_partial_update(client):
    body = _body(_schema(client), "/model/updateModel", "post")
    assert body["required"] == ["modelName"]
    assert [name for name, field in body["properties"].items() if "default" in field] == []
    assert {"baseUrl", "apiKey", "maxConcurrency", "queueLimit", "timeoutSeconds", "route", "remark"} <= set(
        body["properties"]
    )


def test_no_patch_body_advertises_a_default(client):
    schema = _schema(client)
    patched = {
        (path, name)
        for path, item in schema["paths"].items()
        if "patch" in item
        for name, field in _body(schema, path, "patch")["properties"].items()
        if "default" in _resolve(schema, field) or "default" in field
    }
    assert patched == set()
    # POST's own default is the server's, said in words (a client need not send it).
    description = _body(schema, "/learning/knowledge-bases", "post")["properties"]["description"]
    assert "default" not in description and "Default when left out" in description["description"]


def test_the_snapshot_schema_has_the_job_id_the_server_sends(client):
    schema = _schema(client)
    snapshot = _answer(schema, "/internal/runtime/jobs/{job_id}/snapshot", "get")
    assert "jobId" in snapshot["properties"] and "jobId" in snapshot["required"]
    claimed = _resolve(schema, _answer(schema, "/internal/runtime/jobs/claim", "post")["properties"]["jobs"]["items"])
    assert claimed["properties"]["snapshot"]["allOf"] == [{"$ref": "#/components/schemas/Snapshot"}]


def test_the_download_documents_both_media_types_it_answers_with(client):
    content = _schema(client)["paths"]["/task/download/{token}"]["get"]["responses"]["200"]["content"]
    assert content == {
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        "application/json": {"schema": {}},
    }
    # Bytes first: a generated client reads the first media type it knows, and bytes hold any answer.
    assert list(content) == ["application/octet-stream", "application/json"]


def test_a_runtime_authenticates_with_either_scheme_not_both(client):
    schema = _schema(client)
    schemes = schema["components"]["securitySchemes"]
    assert schemes["runtimeBearer"]["scheme"] == "bearer"
    assert (schemes["runtimeApiKey"]["in"], schemes["runtimeApiKey"]["name"]) == ("header", "x-internal-api-key")
    internal = [op for path, item in schema["paths"].items() if path.startswith("/internal/") for op in item.values()]
    assert len(internal) == 9
    assert all(op["security"] == [{"runtimeBearer": []}, {"runtimeApiKey": []}] for op in internal)


def test_cost_cents_is_a_number_everywhere(client):
    schema = _schema(client)
    found = {
        name: field
        for name, component in schema["components"]["schemas"].items()
        for key, field in component.get("properties", {}).items()
        if key == "costCents"
    }
    assert {"ResultInRequest", "InvocationLogRequest", "Usage"} <= set(found)
    assert {name: field["type"] for name, field in found.items()} == dict.fromkeys(found, "number")


@pytest.mark.parametrize("component", ["Job", "ClaimedJob", "UserJob"])
def test_the_enums_of_a_job_are_the_queries_enums(client, component):
    schema = _schema(client)
    job = schema["components"]["schemas"][component]["properties"]
    refs = {name: job[name].get("$ref") for name in ("status", "jobType", "targetType", "apiKeyMode")}
    assert refs == {
        "status": "#/components/schemas/JobStatusEnum",
        "jobType": "#/components/schemas/JobTypeEnum",
        "targetType": "#/components/schemas/TargetTypeEnum",
        "apiKeyMode": "#/components/schemas/ApiKeyModeEnum",
    }
    enums = schema["components"]["schemas"]
    query = {parameter["name"]: parameter["schema"] for parameter in schema["paths"]["/ai/jobs"]["get"]["parameters"]}
    assert sorted(enums["JobStatusEnum"]["enum"]) == sorted(query["status"]["enum"]) == sorted(
        ["pending", "locked", "running", "succeeded", "failed", "cancelled", "expired"])  # fmt: skip
    assert sorted(enums["JobTypeEnum"]["enum"]) == sorted(query["jobType"]["enum"])
    outputs = {parameter["name"]: parameter for parameter in schema["paths"]["/ai/analyses"]["get"]["parameters"]}
    assert sorted(enums["TargetTypeEnum"]["enum"]) == sorted(outputs["targetType"]["schema"]["enum"])
    assert enums["ApiKeyModeEnum"]["enum"] == ["platform_key", "user_deepseek_key"]


def test_limit_states_its_bounds(client):
    schema = _schema(client)
    lists = [
        (path, parameter["schema"])
        for path, item in schema["paths"].items()
        if "get" in item
        for parameter in item["get"].get("parameters", [])
        if parameter["name"] == "limit"
    ]
    assert len(lists) >= 14
    assert all(bounds == {"type": "integer", "minimum": 1, "maximum": 100, "default": 20} for _, bounds in lists), lists
    for path in ("/internal/runtime/jobs/poll", "/internal/runtime/jobs/claim"):
        limit = _body(schema, path, "post")["properties"]["limit"]
        assert (limit["minimum"], "maximum" in limit) == (1, False)  # larger: clamped, not refused
        assert "Default when left out: `10`" in limit["description"]
        assert "clamped to 50" in limit["description"]


def test_the_operations_anyone_may_call_declare_no_security(client):
    schema = _schema(client)
    security = {
        f"{method.upper()} {path}": operation.get("security")
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    }
    open_ones = {name for name, requirement in security.items() if requirement == []}
    assert open_ones == {
        "GET /healthz", "GET /readyz", "GET /metrics", "GET /task/download/{token}", "POST /auth/register",
        "POST /auth/token", "POST /auth/token/refresh", "POST /auth/logout",
    }  # fmt: skip
    assert all(requirement and all(requirement) for name, requirement in security.items() if name not in open_ones)


def test_every_response_field_the_server_always_sends_is_required(client):
    """A generated client reads an optional field as maybe missing (``Unset``): only
    the fields that are sometimes left out may be optional."""
    schema = _schema(client)
    optional = {
        (name, key)
        for name, component in schema["components"]["schemas"].items()
        if not name.endswith("Request") and "properties" in component
        for key in component["properties"]
        if key not in component.get("required", [])
    }
    admin_only = {"id", "baseUrl", "route", "httpMethod", "apiKey", "enabled", "remark", "createdAt", "updatedAt"}
    assert optional == {("ClaimedJob", "snapshot"), ("ClaimedJob", "credential")} | {
        ("ModelListItem", key) for key in admin_only
    }
