"""The runtime's client of the internal API over real HTTP, against stub servers: an
unreachable API told from a definite answer, and every call of a running runtime
taking ``503 SERVICE_UNAVAILABLE`` as "try again"."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from runtime_worker.api import ApiError, ApiUnavailable, Beat, InternalApi
from runtime_worker.backoff import Backoff
from runtime_worker.config import RuntimeConfig
from runtime_worker.runner import Runtime
from tests.support import runtime_fixtures
from tests.support.runtime_fixtures import free_port, wait_for
from tests.support.runtime_worker import SECRET, SNAPSHOT_DATA

standin = runtime_fixtures.standin
_no_leftover_faults = runtime_fixtures._no_leftover_faults


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

    monkeypatch.setattr("runtime_worker.inputs.Backoff", QuickBackoff)
    monkeypatch.setattr("runtime_worker.delivery.Backoff", QuickBackoff)
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
    # The one model call's cost reached the server with the result (its invocationLogs).
    assert len(api.bodies["result"][0]["invocationLogs"]) == 1 and "invocation-logs" not in api.bodies
