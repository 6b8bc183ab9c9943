"""One attempt at one claimed job, from the first heartbeat to the invocation logs
(sent with the result; on their own after a failure or a refused result).

    heartbeat (locked → running) ─▶ snapshot ─▶ credential ─▶ prompt
          ─▶ model (JSON) ─▶ parse ─▶ validate ─▶ result (usage, cost) ─▶ invocation logs

A job claimed on the fast path (``include``) arrives ``running`` with its snapshot and
credential: the first three steps are already done, and it goes straight to the prompt.

Between steps the job passes a *checkpoint*: a cancellation seen on a heartbeat
(``JOB_CANCELLED``), a lost lease (dropped quietly), the job's ``timeoutSeconds``
(``JOB_TIMEOUT``) or a shutdown past its grace period (a retryable failure). The
model call itself runs on a helper thread so that any of these interrupts the
wait at once instead of when the model answers. A result or failure the runtime
holds is retried while the API is unreachable; the server decides, by the lease,
whether it still counts.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from ai_jobs import output_schemas
from config.errors import RuntimeErrorCode
from runtime_worker import invocation_logs, prompts
from runtime_worker.api import ApiError, ApiUnavailable, Credential, InternalApi, Job
from runtime_worker.backoff import Backoff
from runtime_worker.config import RuntimeConfig
from runtime_worker.model import ModelCall, ModelClient, ModelError, parse_json_output
from runtime_worker.pricing import Usage, cost_cents
from runtime_worker.redact import register_secret

logger = logging.getLogger("runtime_worker")

T = TypeVar("T")
SNAPSHOT_VERSIONS = {"v1"}
# The server ends an attempt the moment its timeoutSeconds pass: the runtime's own
# deadline comes a margin earlier, so that its failure report reaches a live attempt.
DEADLINE_MARGIN_SECONDS = 2.0


class Executor(Protocol):
    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]: ...


class Host(Protocol):
    """What an attempt needs of the runtime that runs it (``runtime_worker.runner.Runtime``)."""

    config: RuntimeConfig
    api: InternalApi
    model: ModelClient
    model_pool: Executor
    hard_stop_at: float | None  # past the grace period: when the last reports must be in

    def beat(self, run: JobRun) -> None: ...

    def job_finished(self, run: JobRun, outcome: str) -> None: ...


class _Stop(Exception):
    """End the attempt and report this failure code."""

    def __init__(self, code: RuntimeErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Abandon(Exception):
    """The job is no longer ours (lost lease, cancelled elsewhere): drop it quietly."""


class JobRun:
    """One attempt at one claimed job, run on a slot thread."""

    def __init__(self, runtime: Host, job: Job, *, asked_at: float | None = None) -> None:
        self.runtime = runtime
        self.api = runtime.api
        self.job = job
        # Its lines name the job and the instance (JSON fields jobId, runtimeInstanceId).
        self.log = logging.LoggerAdapter(logger, {"jobId": job.job_id, "runtimeInstanceId": runtime.config.instance_id})
        # Counted from when the claim was asked (``asked_at``, monotonic): the server
        # starts a claimed attempt before its answer arrives.
        margin = min(DEADLINE_MARGIN_SECONDS, job.timeout_seconds / 10)
        self.deadline = (time.monotonic() if asked_at is None else asked_at) + job.timeout_seconds - margin
        self.cancel_requested = False
        self.lost = False
        self.shutdown = False
        self.settled = False  # the server has our result or failure
        self.delivering = False  # sending it: the answer to that call decides, not a heartbeat
        self.wake = threading.Event()
        self.calls: list[ModelCall] = []
        self.logs_delivered = False  # the logs went with the accepted result (contract §3 invocationLogs)

    # --- flags set from other threads --------------------------------------------------

    def request_cancel(self) -> None:
        self.cancel_requested = True
        self.wake.set()

    def lose(self, reason: str) -> None:
        self.lost = True
        self.wake.set()
        self.log.info("job %s: lease lost (%s); abandoning it", self.job.job_id, reason)

    def abort_for_shutdown(self) -> None:
        self.shutdown = True
        self.wake.set()

    # --- the attempt -----------------------------------------------------------------------

    def run(self) -> None:
        outcome = "abandoned"
        try:
            outcome = self._execute()
        except _Stop as stop:
            outcome = self._report_failure(stop.code, stop.message)
        except _Abandon as why:
            self.log.info("job %s: abandoned (%s)", self.job.job_id, why)
        except Exception:
            # A bug, not a job failure: let the lease lapse so the reaper retries it.
            self.log.exception("job %s: unexpected error; leaving it to the reaper", self.job.job_id)
        finally:
            self.settled = True
            if not self.logs_delivered:  # a failure, or a result refused: the logs on their own
                invocation_logs.send(
                    self.api,
                    self.job,
                    self.calls,
                    log=self.log,
                    until=time.monotonic() + self.runtime.config.submit_retry_seconds,
                    hard_stop_at=self.runtime.hard_stop_at,
                )
            self.runtime.job_finished(self, outcome)

    def checkpoint(self, *, holding_answer: bool = False) -> None:
        """Raise if the attempt must end here. With the model's answer in hand, only
        a lost lease or a cancellation stop it: the rest is worth submitting."""
        if self.lost:
            raise _Abandon("lease lost")
        if self.cancel_requested:
            raise _Stop(RuntimeErrorCode.JOB_CANCELLED, "Cancellation requested; stopped at the next checkpoint")
        if holding_answer:
            return
        if self.shutdown:
            # Seed 002 has no shutdown code; MODEL_TIMEOUT is the retryable one that
            # says what happened: the work did not finish in the time it was given.
            raise _Stop(
                RuntimeErrorCode.MODEL_TIMEOUT,
                f"Runtime {self.runtime.config.instance_id} shut down before the job finished "
                f"(grace {self.runtime.config.grace_seconds:g}s)",
            )
        if time.monotonic() > self.deadline:
            raise _Stop(
                RuntimeErrorCode.JOB_TIMEOUT, f"The job ran past its timeoutSeconds ({self.job.timeout_seconds}s)"
            )

    def _execute(self) -> str:
        job = self.job
        started = time.monotonic()
        if job.job_type not in self.runtime.config.capabilities:
            raise _Stop(RuntimeErrorCode.UNSUPPORTED_JOB_TYPE, f"This runtime does not run {job.job_type}")
        try:
            prompts.check(job.job_type, job.prompt_version, job.output_schema_version)
        except (prompts.UnknownPrompt, output_schemas.UnknownSchema) as error:
            raise _Stop(
                RuntimeErrorCode.UNSUPPORTED_JOB_TYPE,
                f"No prompt or output schema for {job.job_type} "
                f"(promptVersion {job.prompt_version}, outputSchemaVersion {job.output_schema_version}): {error}",
            ) from None
        if job.status != "running":  # a claim's fast path already started it and checked consent
            self.runtime.beat(self)  # the first heartbeat: locked → running, and an early cancel
            self.checkpoint()

        snapshot = self._snapshot()
        self.checkpoint()
        credential = self._credential()
        self.checkpoint()

        prompt = prompts.render(
            job_type=job.job_type,
            prompt_version=job.prompt_version,
            output_schema_version=job.output_schema_version,
            target_type=job.target_type,
            target_id=job.target_id,
            snapshot=snapshot["data"],
            params=job.params,
        )
        model_name = credential.model_name or job.model_name
        call = self._call_model(credential, prompt, model_name)
        self.checkpoint(holding_answer=True)

        usage = call.usage or Usage()
        cost = cost_cents(model_name, usage)
        output = self._valid_output(call)
        # The attempt's model calls go with the result, stored in its transaction: one
        # request fewer per job. Were the result refused, run() sends them on their own.
        logs = [invocation_logs.entry(job, made) for made in self.calls]
        self._deliver(
            "result",
            lambda: self.api.result(
                job.job_id,
                attempt_no=job.attempt_no,
                output_schema_version=job.output_schema_version or output_schemas.DEFAULT_VERSION,
                output=output,
                usage=usage.wire(),
                cost_cents=cost,
                invocation_logs=logs,
            ),
            on_refused=self._result_refused,
        )
        self.logs_delivered = True
        self.log.info(
            "job %s (%s) succeeded in %.2fs: %d tokens (%d cached), %s cents",
            job.job_id,
            job.job_type,
            time.monotonic() - started,
            usage.total_tokens,
            usage.cache_hit_tokens,
            cost,
        )
        return "succeeded"

    # --- steps ------------------------------------------------------------------------

    def _fetch(self, what: str, fn: Callable[[], T], *, attempts: int | None) -> T:
        """Call the API, retrying while it is unreachable (bounded by ``attempts``
        and by the checkpoint); a lost lease abandons the job. A 503 does not use up
        ``attempts``: the server says its database is down for now, not that the call
        fails, so the job waits for it (up to its deadline) instead of failing."""
        backoff = Backoff()
        tries = 0
        while True:
            try:
                return fn()
            except ApiUnavailable as error:
                if not error.service_unavailable:
                    tries += 1
                if attempts is not None and tries >= attempts:
                    raise
                self.log.debug("job %s: %s not fetched (%s); retrying", self.job.job_id, what, error)
                self.wake.wait(backoff.next(error.retry_after))
                self.wake.clear()
                self.checkpoint()
            except ApiError as error:
                if error.job_gone:
                    raise _Abandon(f"{what}: {error.code}") from None
                raise

    def _snapshot(self) -> dict[str, Any]:
        job = self.job
        snapshot = job.snapshot
        if snapshot is None:
            try:
                snapshot = self._fetch("snapshot", lambda: self.api.snapshot(job.job_id), attempts=4)
            except (ApiUnavailable, ApiError) as error:
                raise _Stop(RuntimeErrorCode.SNAPSHOT_FETCH_FAILED, f"Snapshot not fetched: {error}") from None
        version = snapshot.get("schemaVersion")
        if version not in SNAPSHOT_VERSIONS:
            raise _Stop(
                RuntimeErrorCode.INVALID_SNAPSHOT,
                f"Snapshot schemaVersion {version!r} is not one this runtime reads ({', '.join(sorted(SNAPSHOT_VERSIONS))})",
            )
        if not isinstance(snapshot.get("data"), dict):
            raise _Stop(RuntimeErrorCode.INVALID_SNAPSHOT, "Snapshot has no data object")
        for key, expected in (("targetType", job.target_type), ("targetId", job.target_id)):
            if snapshot.get(key) not in (None, expected):
                raise _Stop(RuntimeErrorCode.INVALID_SNAPSHOT, f"Snapshot {key} {snapshot.get(key)!r} is not the job's")
        return snapshot

    def _credential(self) -> Credential:
        credential = self.job.credential
        if credential is None:
            try:
                credential = self._fetch("credential", lambda: self.api.credential(self.job.job_id), attempts=None)
            except ApiError as error:
                raise _Stop(RuntimeErrorCode.CREDENTIAL_RESOLVE_FAILED, f"Credential not resolved: {error}") from None
        if not credential.api_key or not credential.base_url:
            raise _Stop(RuntimeErrorCode.CREDENTIAL_RESOLVE_FAILED, "The resolved credential has no key or base URL")
        register_secret(credential.api_key)
        return credential

    def _call_model(self, credential: Credential, prompt: prompts.Prompt, model_name: str) -> ModelCall:
        """The model call, on a helper thread; this thread waits for it, a
        cancellation, a lost lease, a shutdown or the job's deadline."""
        remaining = self.deadline - time.monotonic()
        timeout = min(self.runtime.config.model_timeout_seconds, max(0.1, remaining))
        started_at = _now()
        future = self.runtime.model_pool.submit(
            lambda: self.runtime.model.complete_json(credential, prompt, model_name=model_name, timeout=timeout)
        )
        future.add_done_callback(lambda _: self.wake.set())
        try:
            while not future.done():
                self.checkpoint()
                self.wake.wait(timeout=max(0.01, self.deadline - time.monotonic()))
                self.wake.clear()
        except _Stop as stop:
            future.cancel()
            self.calls.append(ModelCall(model_name=model_name, started_at=started_at, error_code=stop.code.code))
            raise
        try:
            call = future.result()
        except ModelError as error:
            if error.call is not None:
                self.calls.append(error.call)
            if error.code is RuntimeErrorCode.MODEL_TIMEOUT and time.monotonic() >= self.deadline:
                raise _Stop(
                    RuntimeErrorCode.JOB_TIMEOUT, f"The job ran past its timeoutSeconds: {error.message}"
                ) from None
            raise _Stop(error.code, error.message) from None
        self.calls.append(call)
        return call

    def _valid_output(self, call: ModelCall) -> dict[str, Any]:
        job = self.job
        try:
            output = parse_json_output(call.content or "")
        except ModelError as error:
            call.error_code = error.code.code
            raise _Stop(error.code, error.message) from None
        version = job.output_schema_version or output_schemas.DEFAULT_VERSION
        errors = (
            output_schemas.validation_errors(job.job_type, version, output)
            if isinstance(output, dict)
            else [f"(root): the output is a {type(output).__name__}, not an object"]
        )
        if errors:
            call.error_code = RuntimeErrorCode.MODEL_RESPONSE_INVALID.code
            raise _Stop(
                RuntimeErrorCode.MODEL_RESPONSE_INVALID,
                f"The model's output does not match {job.job_type} {version}: " + "; ".join(errors),
            )
        return output

    def _result_refused(self, error: ApiError) -> None:
        if error.code in {"RESULT_SCHEMA_UNSUPPORTED", "VALIDATION_ERROR"}:
            raise _Stop(RuntimeErrorCode.MODEL_RESPONSE_INVALID, f"The server refused the output: {error.message}")
        raise error

    # --- reporting --------------------------------------------------------------------------

    def _deliver(self, what: str, send: Callable[[], T], *, on_refused: Callable[[ApiError], None] | None = None) -> T:
        """Send a result or a failure, retrying while the API is unreachable so a
        result in hand is not lost; a refusal because the job is no longer ours
        abandons it."""
        config = self.runtime.config
        give_up = time.monotonic() + config.submit_retry_seconds
        backoff = Backoff(first=0.2, most=5.0)
        warned = False
        self.delivering = True
        while True:
            try:
                answer = send()
            except ApiUnavailable as error:
                limit = min(give_up, self.runtime.hard_stop_at or give_up)
                delay = backoff.next(error.retry_after)
                if time.monotonic() + delay > limit:
                    self.log.error(
                        "job %s: %s not delivered, API unreachable (%s); the lease will lapse and the job be retried",
                        self.job.job_id,
                        what,
                        error,
                    )
                    raise _Abandon(f"{what} undeliverable") from None
                if not warned:
                    warned = True
                    self.log.warning(
                        "job %s: %s not delivered yet (%s); holding it and retrying", self.job.job_id, what, error
                    )
                time.sleep(delay)
                continue
            except ApiError as error:
                if error.job_gone:
                    raise _Abandon(f"{what} refused: {error.code}") from None
                if on_refused is None:
                    raise
                on_refused(error)
                raise
            self.settled = True
            return answer

    def _report_failure(self, code: RuntimeErrorCode, message: str) -> str:
        job = self.job
        try:
            answer = self._deliver(
                "failure",
                lambda: self.api.fail(
                    job.job_id, attempt_no=job.attempt_no, error_code=code.code, error_message=message
                ),
            )
        except _Abandon as why:
            self.log.info("job %s: %s not recorded (%s)", job.job_id, code.code, why)
            return "abandoned"
        except ApiError as error:
            self.log.error("job %s: failure %s refused: %s", job.job_id, code.code, error)
            return "abandoned"
        self.log.info("job %s (%s): %s → %s: %s", job.job_id, job.job_type, code.code, answer.get("status"), message)
        return f"failed:{code.code}"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
