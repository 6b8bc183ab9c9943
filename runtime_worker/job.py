"""One attempt at one claimed job, from the first heartbeat to the invocation logs
(sent with the result; on their own after a failure or a refused result).

    heartbeat (locked → running) ─▶ snapshot ─▶ credential ─▶ prompt
          ─▶ model (JSON) ─▶ parse ─▶ validate ─▶ result (usage, cost) ─▶ invocation logs

A job claimed on the fast path (``include``) arrives ``running`` with its snapshot and
credential: the first three steps are already done, and it goes straight to the prompt.

Between steps the job passes a *checkpoint*: a cancellation seen on a heartbeat
(``JOB_CANCELLED``), a lost lease (dropped quietly), the job's time running out
(``JOB_TIMEOUT``; ``MODEL_TIMEOUT`` when it runs out during the model call) or a
shutdown past its grace period (``RUNTIME_SHUTDOWN``). The model call runs on a
helper thread so that any of these interrupts the wait at once instead of when the
model answers. The job's time ends a margin before its ``timeoutSeconds``, so the
failure it reports reaches the server while the attempt is still live.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from protocol import output_schemas
from protocol.errors import RuntimeErrorCode
from runtime_worker import inputs, invocation_logs, prompts
from runtime_worker.api import ApiError, Credential, InternalApi, Job
from runtime_worker.attempt import Abandon, Stop
from runtime_worker.config import RuntimeConfig
from runtime_worker.delivery import deliver, report_failure
from runtime_worker.model import ModelCall, ModelClient, ModelError, parse_json_output
from runtime_worker.pricing import Usage, cost_cents

logger = logging.getLogger("runtime_worker")

T = TypeVar("T")
# Refusals of a result that mean the output itself is wrong: the attempt fails.
OUTPUT_REFUSED = {"RESULT_SCHEMA_UNSUPPORTED", "VALIDATION_ERROR"}


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


class JobRun:
    """One attempt at one claimed job, run on a slot thread."""

    def __init__(self, runtime: Host, job: Job, *, asked_at: float | None = None) -> None:
        self.runtime = runtime
        self.api = runtime.api
        self.job = job
        # Its lines name the job and the instance (JSON fields jobId, runtimeInstanceId).
        self.log = logging.LoggerAdapter(logger, {"jobId": job.job_id, "runtimeInstanceId": runtime.config.instance_id})
        # The server ends an attempt the moment its timeoutSeconds pass, counted from its
        # start, which for a claimed job comes before the claim's answer arrives: the work
        # stops a margin before that, counted from when the claim was asked (``asked_at``,
        # monotonic), so that its report reaches a live attempt.
        margin = min(runtime.config.deadline_margin_seconds, job.timeout_seconds / 4)
        self.deadline = (time.monotonic() if asked_at is None else asked_at) + job.timeout_seconds - margin
        self.cancel_requested = False
        self.lost = False
        self.shutdown = False
        self.settled = False  # the server has our result or failure
        self.delivering = False  # sending it: the answer to that call decides, not a heartbeat
        self.wake = threading.Event()
        self.calls: list[ModelCall] = []
        self.logs_delivered = False  # the logs went with the accepted result, in its transaction
        # A model call the attempt stopped waiting for (a lost lease, a cancellation, the
        # job's time, a shutdown): it runs on, the model charges it, and its log waits for it.
        self.in_flight: InFlight | None = None

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
        ended: str | None = None  # the code of what ended the attempt early
        try:
            outcome = self._execute()
        except Stop as stop:
            ended = stop.code.code
            outcome = report_failure(self, stop.code, stop.message)
        except Abandon as why:
            ended = why.code
            self.log.info("job %s: abandoned (%s)", self.job.job_id, why)
        except Exception:
            # A bug, not a job failure: let the lease lapse so the reaper retries it.
            self.log.exception("job %s: unexpected error; leaving it to the reaper", self.job.job_id)
        finally:
            self.settled = True
            self._await_model_call(ended)
            if not self.logs_delivered:  # a failure, or a result refused: the logs on their own
                # None of these calls ended in an accepted result, so each carries a code and
                # counts: one that answered before the attempt ended carries what ended it.
                for call in self.calls:
                    call.error_code = call.error_code or ended
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
            raise Abandon("lease lost", code="JOB_NOT_ACTIVE")  # what the heartbeat answered
        if self.cancel_requested:
            raise Stop(RuntimeErrorCode.JOB_CANCELLED, "Cancellation requested; stopped at the next checkpoint")
        if holding_answer:
            return
        if self.shutdown:
            raise Stop(
                RuntimeErrorCode.RUNTIME_SHUTDOWN,
                f"Runtime {self.runtime.config.instance_id} shut down before the job finished "
                f"(grace {self.runtime.config.grace_seconds:g}s)",
            )
        if time.monotonic() > self.deadline:
            raise Stop(
                RuntimeErrorCode.JOB_TIMEOUT, f"The job ran out of its timeoutSeconds ({self.job.timeout_seconds}s)"
            )

    def _execute(self) -> str:
        job = self.job
        started = time.monotonic()
        if job.job_type not in self.runtime.config.capabilities:
            raise Stop(RuntimeErrorCode.UNSUPPORTED_JOB_TYPE, f"This runtime does not run {job.job_type}")
        try:
            prompts.check(job.job_type, job.prompt_version, job.output_schema_version)
        except (prompts.UnknownPrompt, output_schemas.UnknownSchema) as error:
            raise Stop(
                RuntimeErrorCode.UNSUPPORTED_JOB_TYPE,
                f"No prompt or output schema for {job.job_type} "
                f"(promptVersion {job.prompt_version}, outputSchemaVersion {job.output_schema_version}): {error}",
            ) from None
        if job.status != "running":  # a claim's fast path already started it and checked consent
            self.runtime.beat(self)  # the first heartbeat: locked → running, and an early cancel
            self.checkpoint()

        snapshot = inputs.snapshot(self)
        self.checkpoint()
        credential = inputs.credential(self)
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
        deliver(
            self,
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
            on_refused=lambda error: self._result_refused(call, error),
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

    # --- the model --------------------------------------------------------------------------

    def _call_model(self, credential: Credential, prompt: prompts.Prompt, model_name: str) -> ModelCall:
        """The model call, on a helper thread; this thread waits for it, a
        cancellation, a lost lease, a shutdown or the end of the job's time. A call
        that runs out of time is ``MODEL_TIMEOUT`` whichever limit cut it: the
        provider did not answer, and that is what opens the breaker."""
        timeout = min(self.runtime.config.model_timeout_seconds, max(0.1, self.deadline - time.monotonic()))
        started_at, began = _now(), time.monotonic()
        future = self.runtime.model_pool.submit(
            lambda: self.runtime.model.complete_json(credential, prompt, model_name=model_name, timeout=timeout)
        )
        future.add_done_callback(lambda _: self.wake.set())
        try:
            while not future.done():
                if time.monotonic() > self.deadline:
                    raise Stop(RuntimeErrorCode.MODEL_TIMEOUT, "The model did not answer before the job's time ran out")
                self.checkpoint()
                self.wake.wait(timeout=max(0.01, self.deadline - time.monotonic()))
                self.wake.clear()
        except (Stop, Abandon) as why:
            # A call not started yet is no call; one started counts, with its real tokens,
            # once it ends (``_await_model_call``), whatever ended the attempt.
            if not future.cancel():
                code = why.code.code if isinstance(why, Stop) else why.code or "JOB_NOT_ACTIVE"
                self.in_flight = InFlight(future, model_name, started_at, began, code)
            raise
        try:
            call = future.result()
        except ModelError as error:
            if error.call is not None:
                self.calls.append(error.call)
            raise Stop(error.code, error.message) from None
        self.calls.append(call)
        return call

    def _await_model_call(self, ended: str | None) -> None:
        """The model call the attempt stopped waiting for, once it ends, into the
        attempt's logs with what it cost: every call counts. A runtime that must exit
        first (past its grace period) logs what it knows of it by then."""
        flight = self.in_flight
        if flight is None:
            return
        self.in_flight = None
        while not flight.future.done():
            stop_at = self.runtime.hard_stop_at
            # Leave the last reports their share of the time left before the process exits.
            if stop_at is not None and time.monotonic() >= stop_at - self.runtime.config.final_report_seconds / 2:
                break
            futures.wait([flight.future], timeout=0.2)
        call: ModelCall | None = None
        if flight.future.done():
            try:
                call = flight.future.result()
            except ModelError as error:
                call = error.call
            except Exception:  # a bug in the call: it still ran, what it cost is unknown
                call = None
        if call is None:
            latency_ms = int((time.monotonic() - flight.began) * 1000)
            call = ModelCall(model_name=flight.model_name, started_at=flight.started_at, latency_ms=latency_ms)
        call.error_code = call.error_code or flight.code or ended
        self.calls.append(call)

    def _valid_output(self, call: ModelCall) -> dict[str, Any]:
        job = self.job
        try:
            output = parse_json_output(call.content or "")
        except ModelError as error:
            call.error_code = error.code.code
            raise Stop(error.code, error.message) from None
        version = job.output_schema_version or output_schemas.DEFAULT_VERSION
        errors = (
            output_schemas.validation_errors(job.job_type, version, output)
            if isinstance(output, dict)
            else [f"(root): the output is a {type(output).__name__}, not an object"]
        )
        if errors:
            call.error_code = RuntimeErrorCode.MODEL_RESPONSE_INVALID.code
            raise Stop(
                RuntimeErrorCode.MODEL_RESPONSE_INVALID,
                f"The model's output does not match {job.job_type} {version}: " + "; ".join(errors),
            )
        return output

    def _result_refused(self, call: ModelCall, error: ApiError) -> None:
        """Every call counts, a refused result's too: its call is resent as an
        invocation log with the refusal's code, which the server counts as a call
        that did not end in an accepted result."""
        call.error_code = error.code
        if error.code in OUTPUT_REFUSED:
            raise Stop(RuntimeErrorCode.MODEL_RESPONSE_INVALID, f"The server refused the output: {error.message}")


@dataclass(frozen=True)
class InFlight:
    """A model call still running when its attempt ended: how to log it once it ends."""

    future: Future[ModelCall]
    model_name: str
    started_at: dt.datetime
    began: float  # time.monotonic()
    code: str  # what ended the attempt: the log's errorCode unless the call failed on its own


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
