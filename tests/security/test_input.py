"""Hostile JSON, tried from outside against gunicorn: a body nested deeper than 64
levels, or one that cannot be parsed (``"[" * 50000``), is ``400 VALIDATION_ERROR``
with the API's error body on every operation that takes a JSON body, on every
API (auth unauthenticated, the user API, the internal runtime API, model-asynch), and
never a 500 or a ``RecursionError`` in the log. JSON parsed anywhere else is bounded
too: model-asynch's ``X-User-Info`` header, a model's answer in the reference runtime,
an output handed to the schema validator."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
from django.db import connection

from ai_jobs import output_schemas
from asynch.models import AsynchTask
from config.errors import RuntimeErrorCode
from runtime_worker.api import Credential
from runtime_worker.model import ModelClient, ModelError, parse_json_output
from runtime_worker.prompts import Prompt
from tests.support.api import RUNTIME_TOKEN
from tests.support.api_walk import RUNTIME_ID, World, build_world
from tests.support.ops import Gunicorn
from tests.support.security.input import live, nested

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TOO_DEEP = {"[ x 50000": "[" * 50000, "65 arrays": nested(65), "65 objects": nested(65, key="a")}


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            pytest.skip("gunicorn serves the test database on PostgreSQL")
        with live(tmp_path_factory.mktemp("input") / "gunicorn.log", RUNTIME_SERVICE_TOKENS=RUNTIME_TOKEN) as running:
            yield running


def _json_operations(server: Gunicorn) -> list[tuple[str, str]]:
    schema = requests.get(server.url + "/api/schema", params={"format": "json"}, timeout=10).json()
    return [
        (method.upper(), path)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method != "parameters" and "application/json" in operation.get("requestBody", {}).get("content", {})
    ]


def _as_caller(world: World, method: str, template: str) -> tuple[str, dict[str, str]]:
    """The operation's path with real ids in it, and the headers of who calls it."""
    path = template.replace("{job_id}", world.ids["job_id"]).replace("{credential_id}", world.ids["credential_id"])
    if "{object_id}" in path:
        path = path.replace("{object_id}", world.ids[path.split("/")[2]])
    if path.startswith("/internal/"):
        return path, {"Authorization": f"Bearer {world.runtime_token}", "X-Runtime-Instance-Id": RUNTIME_ID}
    if path.startswith(("/ai/", "/learning/")) or path == "/auth/password":  # a password change is the learner's
        return path, {"Authorization": f"Bearer {world.learner_token}"}
    if path.startswith(("/model/", "/task/", "/webhook/")):
        return path, {"X-Api-Key": world.tenant_key}
    return path, {}  # the rest of /auth/*: anyone, unauthenticated


def _code_of(response: requests.Response) -> str | None:
    try:
        return response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def test_a_body_too_deep_or_unparsable_is_a_validation_error_on_every_json_operation(server: Gunicorn):
    world = build_world()
    operations = _json_operations(server)
    assert len(operations) >= 25 and ("POST", "/auth/token") in operations
    apis = {path.split("/")[1] for _, path in operations}
    assert {"auth", "ai", "learning", "internal", "model", "task"} <= apis
    answers = {}
    for method, template in operations:
        path, headers = _as_caller(world, method, template)
        for name, body in TOO_DEEP.items():
            response = requests.request(
                method,
                server.url + path,
                data=body,
                headers={**headers, "Content-Type": "application/json"},
                timeout=30,
            )
            answers[(method, template, name)] = (response.status_code, _code_of(response))
    refused = {key: answer for key, answer in answers.items() if answer != (400, "VALIDATION_ERROR")}
    # Registration closed is refused before its body is read: not a parse at all.
    refused = {key: answer for key, answer in refused.items() if not (key[1] == "/auth/register" and answer[0] == 403)}
    assert refused == {}
    log = server.log.read_text()
    assert "RecursionError" not in log and "Traceback" not in log and " 500 " not in log


def test_the_error_body_of_a_deep_body_is_the_apis_and_names_the_field(server: Gunicorn):
    response = requests.post(
        server.url + "/auth/token", data="[" * 50000, headers={"Content-Type": "application/json"}, timeout=30
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "code": "VALIDATION_ERROR",
            "message": "JSON parse error - JSON nested deeper than 64 levels",
            "retryable": False,
            "fields": {},
        }
    }
    named = requests.post(
        server.url + "/auth/token",
        data=f'{{"username": "a", "password": {nested(64)}}}',
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert named.status_code == 400 and named.json()["error"]["fields"] == {
        "password": ["JSON nested deeper than 64 levels"]
    }


def test_64_levels_are_still_json(server: Gunicorn):
    world = build_world()
    body = {"jobType": "learning_state_analysis", "targetType": "user", "targetId": "me", "params": {"x": None}}
    text = json.dumps(body).replace("null", nested(62))  # the body, params and 62 arrays: 64 levels
    created = requests.post(
        server.url + "/ai/jobs",
        data=text,
        headers={"Authorization": f"Bearer {world.learner_token}", "Content-Type": "application/json"},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    one_more = requests.post(
        server.url + "/ai/jobs",
        data=text.replace(nested(62), nested(63)),
        headers={"Authorization": f"Bearer {world.learner_token}", "Content-Type": "application/json"},
        timeout=30,
    )
    assert one_more.status_code == 400 and one_more.json()["error"]["fields"] == {
        "params": ["JSON nested deeper than 64 levels"]
    }


def test_a_deep_x_user_info_header_is_text_not_a_crash(server: Gunicorn):
    world = build_world()
    for info in ("[" * 8000, nested(65, key="userId")):
        response = requests.post(
            server.url + "/task/createTask",
            json={"modelName": "walk-model", "requestPayload": {"q": 1}, "bizName": "deep"},
            headers={"X-Api-Key": world.tenant_key, "X-User-Info": info},
            timeout=30,
        )
        assert response.status_code == 201, response.text
        task = AsynchTask.objects.get(id=response.json()["taskId"])
        assert task.creator == info[:255]  # kept as text, as any header that is not a JSON object


# --- outside the parser: the reference runtime and the schema validator -------------------------


def test_an_output_too_deep_for_the_validator_is_one_schema_error():
    deep = {"summary": json.loads(nested(900)), "level": "beginner"}
    for job_type in ("learning_state_analysis", "quiz_generation"):
        assert output_schemas.validation_errors(job_type, "v1", deep) == ["(root): JSON nested deeper than 64 levels"]


class _Model(ThreadingHTTPServer):
    """A model provider answering every chat completion with ``answer`` (raw bytes)."""

    daemon_threads = True

    def __init__(self, answer: bytes) -> None:
        self.answer = answer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(server.answer)))
                self.end_headers()
                self.wfile.write(server.answer)

            def log_message(self, *args: Any) -> None:
                pass

        server = self
        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def _completion(content: str) -> bytes:
    return json.dumps({"id": "c1", "choices": [{"message": {"content": content}}], "usage": {}}).encode()


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        (b'{"choices": ' + b"[" * 50000, RuntimeErrorCode.MODEL_RESPONSE_INVALID),  # the answer itself
        (_completion("[" * 50000), RuntimeErrorCode.MODEL_JSON_PARSE_FAILED),  # the JSON the model wrote
    ],
)
def test_a_deep_model_answer_is_a_model_error_in_the_runtime(answer: bytes, code: RuntimeErrorCode):
    model = _Model(answer)
    try:
        client = ModelClient()
        credential = Credential(
            api_key_mode="platform_key", provider="deepseek", base_url=model.url, model_name="m", api_key="sk-t-0123456"
        )
        with pytest.raises(ModelError) as raised:
            call = client.complete_json(credential, Prompt(system="s", user="u"), model_name="m", timeout=10)
            parse_json_output(call.content or "")
    finally:
        model.shutdown()
        model.server_close()
    assert raised.value.code is code
