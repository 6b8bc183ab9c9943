"""The reference runtime's parts without the server: a learner's snapshot, prompts
and credentials for the stand-in model, and a scripted internal API to run one
attempt (``JobRun``) or a whole ``Runtime`` against."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from runtime_worker import prompts
from runtime_worker.api import Beat, Credential, Job
from runtime_worker.config import RuntimeConfig
from runtime_worker.job import JobRun
from runtime_worker.runner import Runtime

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


def credential(base_url: str, key: str = SECRET) -> Credential:
    return Credential("platform_key", "deepseek", base_url, "deepseek-chat", key)


def prompt(job_type: str = "learning_state_analysis", **params: Any) -> prompts.Prompt:
    return prompts.render(
        job_type=job_type,
        prompt_version="v1",
        output_schema_version="v1",
        target_type="knowledge_base",
        target_id="kb_1",
        snapshot=SNAPSHOT_DATA,
        params=params,
    )


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
        self.credential_body = credential(base_url)
        self.cancel_requested = False
        self.raises: dict[str, list[Exception]] = defaultdict(list)
        self.sent: dict[str, list[Any]] = defaultdict(list)
        self._lock = threading.Lock()

    def _call(self, name: str, payload: Any = None) -> None:
        with self._lock:
            self.sent[name].append(payload)
            if self.raises[name]:
                raise self.raises[name].pop(0)

    def claim(self, capabilities: list[str], limit: int, *, claim_id: str | None = None) -> list[Job]:
        self._call("claim", claim_id)
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


def make_job(job_type: str = "learning_state_analysis", **fields: Any) -> Job:
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


def scripted_runtime(api: ScriptedApi, **overrides: Any) -> Runtime:
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


def run_one(api: ScriptedApi, job: Job, **overrides: Any) -> str:
    """One attempt at ``job`` on a runtime of its own; the outcome it counted."""
    runtime = scripted_runtime(api, **overrides)
    run = JobRun(runtime, job)
    runtime._active[job.job_id] = run
    run.run()
    [outcome] = runtime.stats
    return outcome


def active_jobs(runtime: Runtime) -> list[str]:
    """The ids of the jobs the runtime holds right now."""
    with runtime._lock:
        return list(runtime._active)
