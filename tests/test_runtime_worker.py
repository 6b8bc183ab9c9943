"""The reference runtime's parts without the server: pricing, prompts, the stand-in
model and the model client over real HTTP, and a job's life against a scripted
internal API (every runtime error code it reports, its resilience)."""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ai_jobs import output_schemas
from runtime_worker import pricing, prompts, redact
from runtime_worker.api import ApiError, ApiUnavailable, Beat, Credential, InternalApi, Job, wire_cents
from runtime_worker.backoff import Backoff
from runtime_worker.config import RuntimeConfig
from runtime_worker.job import JobRun
from runtime_worker.model import ModelClient, ModelError, parse_json_output
from runtime_worker.runner import Runtime
from tests.support import runtime_fixtures
from tests.support.api import ALL_TYPES
from tests.support.runtime_fixtures import free_port, wait_for

standin = runtime_fixtures.standin
_no_leftover_faults = runtime_fixtures._no_leftover_faults

SECRET = "sk-unit-secret-key-0123456789"
SNAPSHOT_DATA = {
    "learner": {"userId": "7", "username": "ada"},
    "target": {"type": "knowledge_base", "id": "kb_1"},
    "knowledgePoints": [
        {"id": "kp_1", "name": "Fractions", "mastery": {"attemptCount": 5, "correctCount": 1}},
        {"id": "kp_2", "name": "Decimals", "mastery": {"attemptCount": 4, "correctCount": 4}},
    ],
    "recentAttempts": [{"knowledgePointId": "kp_1", "isCorrect": False}],
}


# --- pricing --------------------------------------------------------------------------------


def test_cost_prices_cache_hits_misses_and_output_separately():
    usage = pricing.Usage.from_api(
        {
            "prompt_tokens": 1000,
            "completion_tokens": 500,
            "total_tokens": 1500,
            "prompt_cache_hit_tokens": 600,
            "prompt_cache_miss_tokens": 400,
        }
    )
    # (600 x 0.028 + 400 x 0.28 + 500 x 0.42) USD per million tokens, in cents
    assert pricing.cost_cents("deepseek-chat", usage) == Decimal("0.0339")
    assert usage.wire() == {"promptTokens": 1000, "completionTokens": 500, "totalTokens": 1500}


@pytest.mark.parametrize("cents", ["0.0339", "0", "1.5", "12345.6789", "9999999999.9999"])
def test_a_cost_goes_on_the_wire_as_the_json_number_the_schema_documents_and_comes_back_exact(cents):
    sent = json.dumps({"costCents": wire_cents(Decimal(cents))})
    assert isinstance(json.loads(sent)["costCents"], float)
    assert Decimal(str(json.loads(sent)["costCents"])) == Decimal(cents)  # as the server reads it


def test_a_prompt_without_a_cache_split_is_priced_as_all_misses_and_an_unknown_model_as_deepseek_chat():
    usage = pricing.Usage.from_api({"prompt_tokens": 1_000_000, "completion_tokens": 0})
    assert (usage.cache_hit_tokens, usage.cache_miss_tokens, usage.total_tokens) == (0, 1_000_000, 1_000_000)
    assert pricing.cost_cents("some-new-model", usage) == pricing.cost_cents("deepseek-chat", usage) == Decimal("28")
    cached = pricing.Usage.from_api({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 64}})
    assert (cached.cache_hit_tokens, cached.cache_miss_tokens) == (64, 36)


# --- prompts ------------------------------------------------------------------------------


@pytest.mark.parametrize("job_type", ALL_TYPES)
def test_every_job_type_has_a_v1_prompt_with_its_schema_and_the_snapshot(job_type):
    prompt = prompts.render(
        job_type=job_type,
        prompt_version="v1",
        output_schema_version="v1",
        target_type="knowledge_base",
        target_id="kb_1",
        snapshot=SNAPSHOT_DATA,
        params={"questionCount": 7, "cardCount": 9},
    )
    assert json.dumps(output_schemas.schema(job_type, "v1"), sort_keys=True) in prompt.system
    assert "json" in prompt.system.lower()  # DeepSeek's JSON mode requires the word
    assert '"Fractions"' in prompt.user and f"Job type: {job_type}" in prompt.user
    assert "$" not in prompt.user
    if job_type == "quiz_generation":
        assert "Write 7 quiz questions" in prompt.user
    if job_type == "flashcard_generation":
        assert "Write 9 flashcards" in prompt.user
    assert [m["role"] for m in prompt.messages()] == ["system", "user"]


def test_a_prompt_version_without_templates_or_a_path_outside_them_is_unknown():
    assert sorted(prompts.job_types()) == sorted(ALL_TYPES)
    with pytest.raises(prompts.UnknownPrompt):
        prompts.check("learning_state_analysis", "v999", "v1")
    with pytest.raises(prompts.UnknownPrompt):
        prompts.check("../v1/learning_state_analysis", "v1", "v1")
    with pytest.raises(output_schemas.UnknownSchema):
        prompts.check("learning_state_analysis", "v1", "v999")


# --- the stand-in and the model client over HTTP ---------------------------------------------


def _credential(base_url: str, key: str = SECRET) -> Credential:
    return Credential("platform_key", "deepseek", base_url, "deepseek-chat", key)


def _prompt(job_type: str = "learning_state_analysis", **params: Any) -> prompts.Prompt:
    return prompts.render(
        job_type=job_type,
        prompt_version="v1",
        output_schema_version="v1",
        target_type="knowledge_base",
        target_id="kb_1",
        snapshot=SNAPSHOT_DATA,
        params=params,
    )


@pytest.mark.parametrize("job_type", ALL_TYPES)
def test_the_standin_answers_each_job_type_with_a_schema_valid_output_from_the_snapshot(standin, job_type):
    call = ModelClient().complete_json(
        _credential(standin.base_url), _prompt(job_type, questionCount=3), model_name="deepseek-chat", timeout=10
    )
    output = parse_json_output(call.content)
    assert output_schemas.validation_errors(job_type, "v1", output) == []
    assert call.http_status == 200 and call.request_id and call.usage.prompt_tokens > 0
    assert "Fractions" in call.content  # derived from the snapshot, not canned
    if job_type == "weak_point_analysis":
        assert output["weakPoints"][0]["knowledgePointId"] == "kp_1"  # the weakest first
    if job_type == "quiz_generation":
        assert len(output["questions"]) == 3


def test_the_standin_lists_models_reports_cache_hits_and_wants_a_key(standin):
    client = ModelClient()
    assert client.models(_credential(standin.base_url)) == ["deepseek-chat", "deepseek-reasoner"]
    first = client.complete_json(_credential(standin.base_url), _prompt(), model_name="deepseek-chat", timeout=10)
    again = client.complete_json(_credential(standin.base_url), _prompt(), model_name="deepseek-chat", timeout=10)
    assert again.usage.cache_hit_tokens > 0 and again.usage.cache_hit_tokens % 64 == 0
    assert again.usage.cache_hit_tokens + again.usage.cache_miss_tokens == first.usage.prompt_tokens
    with pytest.raises(ModelError) as refused:
        client.complete_json(_credential(standin.base_url, key=""), _prompt(), model_name="deepseek-chat", timeout=10)
    assert refused.value.code.code == "CREDENTIAL_RESOLVE_FAILED"


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        ({"status": 429}, "MODEL_RATE_LIMIT"),
        ({"status": 500}, "MODEL_TIMEOUT"),
        ({"status": 503}, "MODEL_TIMEOUT"),
        ({"delay": 2.0}, "MODEL_TIMEOUT"),
        ({"drop": True}, "MODEL_NETWORK_ERROR"),
        ({"status": 400}, "MODEL_RESPONSE_INVALID"),
    ],
)
def test_model_failures_map_to_the_runtime_codes_of_seed_002(standin, fault, code):
    standin.model.add_faults([fault])
    with pytest.raises(ModelError) as failed:
        ModelClient().complete_json(_credential(standin.base_url), _prompt(), model_name="deepseek-chat", timeout=0.5)
    assert failed.value.code.code == code
    assert failed.value.call is not None and failed.value.call.error_code == code


def test_a_model_nobody_listens_for_is_a_network_error():
    with pytest.raises(ModelError) as failed:
        ModelClient().complete_json(
            _credential(f"http://127.0.0.1:{free_port()}"), _prompt(), model_name="deepseek-chat", timeout=1
        )
    assert failed.value.code.code == "MODEL_NETWORK_ERROR"


def test_output_that_is_not_json_fails_to_parse_and_a_fenced_one_is_accepted(standin):
    standin.model.add_faults([{"badJson": True}])
    call = ModelClient().complete_json(_credential(standin.base_url), _prompt(), model_name="deepseek-chat", timeout=5)
    with pytest.raises(ModelError) as failed:
        parse_json_output(call.content)
    assert failed.value.code.code == "MODEL_JSON_PARSE_FAILED"
    with pytest.raises(ModelError):
        parse_json_output("   ")
    assert parse_json_output('```json\n{"a": 1}\n```') == {"a": 1}


def test_the_standin_takes_faults_over_its_control_endpoint_and_counts_requests(standin):
    import requests

    client = ModelClient()
    assert requests.post(f"{standin.base_url}/_standin/faults", json=["not", "an", "object"]).status_code == 400
    set_faults = requests.post(f"{standin.base_url}/_standin/faults", json={"faults": [{"status": 429, "times": 2}]})
    assert set_faults.status_code == 200
    for _ in range(2):
        with pytest.raises(ModelError) as limited:
            client.complete_json(_credential(standin.base_url), _prompt(), model_name="deepseek-chat", timeout=5)
        assert limited.value.code.code == "MODEL_RATE_LIMIT"
    assert client.complete_json(_credential(standin.base_url), _prompt(), model_name="deepseek-chat", timeout=5)
    requests.post(f"{standin.base_url}/_standin/faults", json={"faults": [{"status": 500, "times": None}]})
    assert requests.delete(f"{standin.base_url}/_standin/faults").status_code == 200
    assert client.complete_json(_credential(standin.base_url), _prompt(), model_name="deepseek-chat", timeout=5)
    assert requests.get(f"{standin.base_url}/_standin/stats").json()["job:learning_state_analysis"] == 4


def test_the_standin_takes_faults_by_marker_and_only_for_matching_prompts(standin):
    client = ModelClient()
    standin.model.add_faults([{"status": 429, "match": "only-this-one"}])
    assert client.complete_json(_credential(standin.base_url), _prompt(), model_name="deepseek-chat", timeout=5)
    with pytest.raises(ModelError) as marked:
        client.complete_json(
            _credential(standin.base_url), _prompt(note="[standin:502]"), model_name="deepseek-chat", timeout=5
        )
    assert marked.value.code.code == "MODEL_TIMEOUT"
    with pytest.raises(ModelError) as matched:
        client.complete_json(
            _credential(standin.base_url), _prompt(note="only-this-one"), model_name="deepseek-chat", timeout=5
        )
    assert matched.value.code.code == "MODEL_RATE_LIMIT"


# --- the internal API client against a stub server ------------------------------------------------


class _StubApi(ThreadingHTTPServer):
    """Answers every request with the next (status, body, headers) of ``answers``."""

    def __init__(self, answers: list[tuple[int, Any, dict[str, str]]]) -> None:
        self.answers = answers
        self.seen: list[tuple[str, str, dict[str, str], str]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                stub.seen.append((self.command, self.path, dict(self.headers), body))
                status, payload, headers = stub.answers.pop(0)
                data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_the_api_client_tells_an_unreachable_api_from_a_definite_answer():
    job = {"jobId": "job_1", "jobType": "quiz_generation", "attemptNo": 2, "timeoutSeconds": 60, "params": {"a": 1}}
    stub = _StubApi(
        [
            (200, {"jobs": [job]}, {}),
            (503, {"error": {"code": "INTERNAL_ERROR"}}, {}),
            (429, {"error": {"code": "RATE_LIMITED"}}, {"Retry-After": "3"}),
            (409, {"error": {"code": "JOB_NOT_ACTIVE", "message": "lapsed", "retryable": False}}, {}),
            (200, {"jobId": "job_1", "lockUntil": 1700000000123, "cancelRequested": True}, {}),
        ]
    )
    try:
        api = InternalApi(f"http://127.0.0.1:{stub.server_address[1]}", "tok-123", "rt-9", timeout=5)
        [claimed] = api.claim(["quiz_generation"], 3)
        assert (claimed.job_id, claimed.attempt_no, claimed.timeout_seconds, claimed.params) == (
            "job_1",
            2,
            60,
            {"a": 1},
        )
        with pytest.raises(ApiUnavailable):
            api.heartbeat("job_1")
        with pytest.raises(ApiUnavailable) as throttled:
            api.heartbeat("job_1")
        assert throttled.value.retry_after == 3
        with pytest.raises(ApiError) as refused:
            api.fail("job_1", attempt_no=2, error_code="MODEL_TIMEOUT", error_message="key sk-abcdefgh12345 leaked?")
        assert refused.value.code == "JOB_NOT_ACTIVE" and refused.value.job_gone
        assert api.heartbeat("job_1") == Beat(lock_until_ms=1700000000123, cancel_requested=True)
    finally:
        stub.shutdown()
    method, path, headers, body = stub.seen[0]
    assert (method, path) == ("POST", "/internal/runtime/jobs/claim")
    assert headers["Authorization"] == "Bearer tok-123" and headers["x-runtime-instance-id"] == "rt-9"
    assert json.loads(body) == {"capabilities": ["quiz_generation"], "limit": 3}
    assert "sk-abcdefgh12345" not in stub.seen[3][3]  # an error message leaves with keys masked
    with pytest.raises(ApiUnavailable):
        InternalApi(f"http://127.0.0.1:{free_port()}", "t", "rt").claim(["quiz_generation"], 1)


class _DownThenUpApi(ThreadingHTTPServer):
    """The internal API over HTTP whose database is down: each call answers the
    contract's ``503 SERVICE_UNAVAILABLE`` (``Retry-After``) its first ``down[name]``
    times, then answers as the server would."""

    UNAVAILABLE = {"error": {"code": "SERVICE_UNAVAILABLE", "message": "database down", "retryable": True}}

    def __init__(self, jobs: list[dict[str, Any]], snapshot: dict[str, Any], credential: dict[str, Any],
                 down: dict[str, int]) -> None:  # fmt: skip
        self.jobs, self.down = list(jobs), dict(down)
        self.seen: dict[str, list[int]] = defaultdict(list)
        self.bodies: dict[str, list[Any]] = defaultdict(list)
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                name = self.path.rstrip("/").rsplit("/", 1)[-1]
                if stub.down.get(name, 0) > 0:
                    stub.down[name] -= 1
                    status, payload, headers = 503, stub.UNAVAILABLE, {"Retry-After": "0"}
                else:
                    status, payload, headers = 200, stub.answer(name, body), {}
                stub.seen[name].append(status)
                if status == 200:
                    stub.bodies[name].append(body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

        self._answers = {"snapshot": snapshot, "credential": credential}
        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def answer(self, name: str, body: Any) -> dict[str, Any]:
        if name == "claim":
            taken, self.jobs = self.jobs[: body["limit"]], self.jobs[body["limit"] :]
            return {"jobs": taken}
        if name == "heartbeat":
            return {"lockUntil": 0, "cancelRequested": False}
        if name == "result":
            return {"status": "succeeded", "duplicate": False}
        if name == "fail":
            return {"status": "failed", "retryCount": 0}
        if name == "invocation-logs":
            return {"accepted": len(body["logs"])}
        return self._answers[name]


def test_every_call_of_the_runtime_takes_503_service_unavailable_as_try_again(standin, monkeypatch):
    class QuickBackoff(Backoff):  # the runtime's own pacing, shortened for the test
        def __init__(self, first: float = 0.01, most: float = 0.05) -> None:
            super().__init__(first=0.01, most=0.05)

    monkeypatch.setattr("runtime_worker.job.Backoff", QuickBackoff)
    monkeypatch.setattr("runtime_worker.runner.Backoff", QuickBackoff)
    monkeypatch.setattr("runtime_worker.invocation_logs.Backoff", QuickBackoff)
    wire = {"jobType": "learning_state_analysis", "targetType": "knowledge_base", "targetId": "kb_1",
            "attemptNo": 1, "timeoutSeconds": 30, "promptVersion": "v1", "outputSchemaVersion": "v1"}  # fmt: skip
    api = _DownThenUpApi(
        jobs=[{**wire, "jobId": "job_ok"}, {**wire, "jobId": "job_unsupported", "promptVersion": "v999"}],
        snapshot={"schemaVersion": "v1", "targetType": "knowledge_base", "targetId": "kb_1", "data": SNAPSHOT_DATA},
        credential={
            "apiKeyMode": "platform_key",
            "provider": "deepseek",
            "baseUrl": standin.base_url,
            "modelName": "deepseek-chat",
            "apiKey": SECRET,
        },
        # more 503s for the snapshot than the 4 tries an unreachable API gets: a 503 is not a failure
        down={"claim": 3, "snapshot": 6, "credential": 3, "result": 3, "fail": 3, "invocation-logs": 3},
    )
    config = RuntimeConfig(api_url=f"http://127.0.0.1:{api.server_address[1]}", token="t", instance_id="rt-503",
                           heartbeat_seconds=0.05, poll_interval_ms=20, submit_retry_seconds=30)  # fmt: skip
    runtime = Runtime(config)
    runtime.start()
    try:
        wait_for(lambda: sum(runtime.stats.values()) == 2, timeout=30, what="both jobs")
    finally:
        runtime.stop(timeout=10)
        api.shutdown()
    assert runtime.stats == {"succeeded": 1, "failed:UNSUPPORTED_JOB_TYPE": 1}
    for name in ("claim", "snapshot", "credential", "result", "fail"):
        assert api.seen[name][: api.seen[name].index(200)] == [503] * {"claim": 3, "snapshot": 6}.get(name, 3), name
    assert api.seen["result"].count(200) == 1 and api.seen["fail"].count(200) == 1
    [failure] = api.bodies["fail"]
    assert failure["errorCode"] == "UNSUPPORTED_JOB_TYPE"
    # The one model call's cost reached the server with the result (contract §3 invocationLogs).
    assert len(api.bodies["result"][0]["invocationLogs"]) == 1 and "invocation-logs" not in api.bodies


# --- a job against a scripted internal API -----------------------------------------------------


class ScriptedApi:
    """The internal API's calls, answered from a script; ``raises[name]`` lists
    exceptions a call raises, in order, before it answers normally."""

    def __init__(self, base_url: str, *, jobs: list[Job] | None = None) -> None:
        self.jobs = list(jobs or [])
        self.snapshot_body: dict[str, Any] = {
            "schemaVersion": "v1",
            "targetType": "knowledge_base",
            "targetId": "kb_1",
            "data": SNAPSHOT_DATA,
        }
        self.credential_body = _credential(base_url)
        self.cancel_requested = False
        self.raises: dict[str, list[Exception]] = defaultdict(list)
        self.sent: dict[str, list[Any]] = defaultdict(list)
        self._lock = threading.Lock()

    def _call(self, name: str, payload: Any = None) -> None:
        with self._lock:
            self.sent[name].append(payload)
            if self.raises[name]:
                raise self.raises[name].pop(0)

    def claim(self, capabilities: list[str], limit: int) -> list[Job]:
        self._call("claim")
        with self._lock:
            taken, self.jobs = self.jobs[:limit], self.jobs[limit:]
        return taken

    def heartbeat(self, job_id: str) -> Beat:
        self._call("heartbeat", job_id)
        return Beat(lock_until_ms=0, cancel_requested=self.cancel_requested)

    def snapshot(self, job_id: str) -> dict[str, Any]:
        self._call("snapshot", job_id)
        return self.snapshot_body

    def credential(self, job_id: str) -> Credential:
        self._call("credential", job_id)
        return self.credential_body

    def result(self, job_id: str, **body: Any) -> dict[str, Any]:
        self._call("result", body)
        return {"jobId": job_id, "status": "succeeded", "duplicate": False}

    def fail(self, job_id: str, **body: Any) -> dict[str, Any]:
        self._call("fail", body)
        return {"jobId": job_id, "status": "failed"}

    def invocation_logs(self, job_id: str, logs: list[dict[str, Any]]) -> dict[str, Any]:
        self._call("invocation_logs", logs)
        return {"accepted": len(logs)}


def _job(job_type: str = "learning_state_analysis", **fields: Any) -> Job:
    values: dict[str, Any] = {
        "job_id": "job_unit",
        "job_type": job_type,
        "target_type": "knowledge_base",
        "target_id": "kb_1",
        "attempt_no": 1,
        "timeout_seconds": 30,
        "prompt_version": "v1",
        "output_schema_version": "v1",
        "model_name": "deepseek-chat",
        "model_provider": "deepseek",
        "lock_until_ms": None,
        "params": {},
    }
    values.update(fields)
    return Job(**values)


def _runtime(api: ScriptedApi, **overrides: Any) -> Runtime:
    config = RuntimeConfig(
        api_url="http://unused",
        token="t",
        instance_id="rt-unit",
        heartbeat_seconds=0.05,
        poll_interval_ms=20,
        grace_seconds=0.2,
        final_report_seconds=2,
        submit_retry_seconds=5,
        **overrides,
    )
    return Runtime(config, api=api)  # type: ignore[arg-type]


def run_one(api: ScriptedApi, job: Job) -> str:
    runtime = _runtime(api)
    run = JobRun(runtime, job)
    runtime._active[job.job_id] = run
    run.run()
    [outcome] = runtime.stats
    return outcome


def test_a_job_runs_end_to_end_and_reports_usage_cost_and_its_invocation_log(standin):
    api = ScriptedApi(standin.base_url)
    assert run_one(api, _job()) == "succeeded"
    [result] = api.sent["result"]
    assert result["attempt_no"] == 1 and result["output_schema_version"] == "v1"
    assert output_schemas.validation_errors("learning_state_analysis", "v1", result["output"]) == []
    assert result["usage"]["promptTokens"] > 0 and result["cost_cents"] > 0
    [log] = result["invocation_logs"]  # sent with the result, not on their own
    assert log["httpStatus"] == 200 and log["errorCode"] is None and log["requestId"].startswith("chatcmpl-")
    assert isinstance(log["costCents"], float) and log["costCents"] > 0  # a number, as the schema has it
    assert api.sent["heartbeat"] == ["job_unit"] and not api.sent["fail"] and not api.sent["invocation_logs"]


def test_a_result_in_hand_is_held_and_retried_while_the_api_is_unreachable(standin):
    api = ScriptedApi(standin.base_url)
    api.raises["result"] = [ApiUnavailable("connection refused"), ApiUnavailable("HTTP 503 from result")]
    assert run_one(api, _job()) == "succeeded"
    assert len(api.sent["result"]) == 3 and len({json.dumps(r, default=str) for r in api.sent["result"]}) == 1
    assert not api.sent["fail"]


def test_a_result_refused_because_the_lease_was_lost_is_dropped_quietly(standin):
    api = ScriptedApi(standin.base_url)
    api.raises["result"] = [ApiError(409, "JOB_NOT_ACTIVE", "the lease lapsed")]
    assert run_one(api, _job()) == "abandoned"
    assert not api.sent["fail"] and api.sent["invocation_logs"]


def test_a_snapshot_the_api_cannot_serve_is_snapshot_fetch_failed(standin):
    api = ScriptedApi(standin.base_url)
    api.raises["snapshot"] = [ApiUnavailable("HTTP 502")] * 4
    assert run_one(api, _job()) == "failed:SNAPSHOT_FETCH_FAILED"
    api = ScriptedApi(standin.base_url)
    api.raises["snapshot"] = [ApiError(404, "SNAPSHOT_NOT_FOUND", "gone")]
    assert run_one(api, _job()) == "failed:SNAPSHOT_FETCH_FAILED"
    assert not api.sent["invocation_logs"]  # no model call was made


@pytest.mark.parametrize(
    "snapshot",
    [
        {"schemaVersion": "v99", "data": {}},
        {"schemaVersion": "v1", "data": "not an object"},
        {"schemaVersion": "v1", "targetType": "knowledge_base", "targetId": "kb_other", "data": {}},
    ],
)
def test_a_snapshot_this_runtime_cannot_read_is_invalid_snapshot(standin, snapshot):
    api = ScriptedApi(standin.base_url)
    api.snapshot_body = snapshot
    assert run_one(api, _job()) == "failed:INVALID_SNAPSHOT"


def test_a_credential_that_does_not_resolve_is_credential_resolve_failed(standin):
    api = ScriptedApi(standin.base_url)
    api.raises["credential"] = [ApiError(404, "CREDENTIAL_NOT_FOUND", "deleted")]
    assert run_one(api, _job()) == "failed:CREDENTIAL_RESOLVE_FAILED"
    api = ScriptedApi(standin.base_url)
    api.credential_body = _credential("")
    assert run_one(api, _job()) == "failed:CREDENTIAL_RESOLVE_FAILED"


def test_a_job_type_without_a_prompt_is_unsupported(standin):
    api = ScriptedApi(standin.base_url)
    assert run_one(api, _job(prompt_version="v999")) == "failed:UNSUPPORTED_JOB_TYPE"
    assert run_one(api, _job(job_type="poem_generation")) == "failed:UNSUPPORTED_JOB_TYPE"
    assert not api.sent["snapshot"]


def test_a_cancel_seen_on_the_first_heartbeat_stops_before_the_model(standin):
    api = ScriptedApi(standin.base_url)
    api.cancel_requested = True
    assert run_one(api, _job()) == "failed:JOB_CANCELLED"
    assert api.sent["fail"][0]["error_code"] == "JOB_CANCELLED" and not api.sent["snapshot"]


def test_output_that_misses_the_schema_is_model_response_invalid(standin):
    standin.model.add_faults([{"invalidOutput": True}])
    api = ScriptedApi(standin.base_url)
    assert run_one(api, _job()) == "failed:MODEL_RESPONSE_INVALID"
    assert "summary" in api.sent["fail"][0]["error_message"]  # names what is missing
    assert api.sent["invocation_logs"][0][0]["errorCode"] == "MODEL_RESPONSE_INVALID"


def test_the_runtime_backs_off_while_the_api_is_down_then_claims(standin):
    api = ScriptedApi(standin.base_url, jobs=[_job()])
    api.raises["claim"] = [ApiUnavailable("connection refused")] * 3
    runtime = _runtime(api)
    runtime.start()
    try:
        wait_for(lambda: runtime.stats["succeeded"] == 1, timeout=30, what="the job")
    finally:
        runtime.stop(timeout=10)
    assert len(api.sent["claim"]) >= 4


def active_jobs(runtime: Runtime) -> list[str]:
    """The ids of the jobs the runtime holds right now."""
    with runtime._lock:
        return list(runtime._active)


def test_shutdown_lets_jobs_run_for_the_grace_period_then_reports_them_retryable(standin):
    standin.model.add_faults([{"delay": 30, "times": None}])
    api = ScriptedApi(standin.base_url, jobs=[_job(job_id="job_a"), _job(job_id="job_b")])
    runtime = _runtime(api)
    runtime.start()
    wait_for(lambda: standin.model.snapshot_stats()["requests"] == 2, what="both model calls")
    runtime.stop(timeout=15)
    assert not runtime._thread.is_alive() and active_jobs(runtime) == []
    codes = sorted(f["error_code"] for f in api.sent["fail"])
    assert codes == ["MODEL_TIMEOUT", "MODEL_TIMEOUT"]
    assert "shut down" in api.sent["fail"][0]["error_message"]
    assert runtime.stats["failed:MODEL_TIMEOUT"] == 2 and len(api.sent["claim"]) >= 1


# --- the runtime is a client (DESIGN rule 6) -------------------------------------------------------

SERVER_APPS = {"ai_jobs", "learning", "credentials", "quotas", "asynch", "config"}
SHARED = {"ai_jobs.output_schemas", "config.errors"}


def test_the_runtime_imports_nothing_of_the_server_but_the_schemas_and_error_codes():
    import ast
    from pathlib import Path

    offending = []
    for path in (Path(__file__).resolve().parent.parent / "runtime_worker").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in SERVER_APPS and not any(
                    name == s or name.startswith(s + ".") or s.startswith(name) for s in SHARED
                ):
                    offending.append(f"{path.name}: {name}")
    assert offending == []


# --- keys stay out of logs ------------------------------------------------------------------------


def test_keys_are_masked_in_log_records_and_error_messages(caplog):
    redact.register_secret("my-very-private-user-key")
    handler = logging.Handler()
    records: list[str] = []
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    handler.addFilter(redact.RedactingFilter())
    log = logging.getLogger("runtime_worker.test_redact")
    log.addHandler(handler)
    try:
        log.warning("calling with %s and %s", "my-very-private-user-key", "sk-abcdef1234567890")
    finally:
        log.removeHandler(handler)
    assert records == ["calling with **** and sk-****"]
    assert redact.redact("Bearer sk-live-0123456789abc") == "Bearer sk-****"
    assert "0123456789" not in repr(_credential("http://x", key="sk-live-0123456789abc"))
