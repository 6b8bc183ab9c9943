"""An attempt's invocation logs: one per model call it made, sent with the accepted
result or, after a failure or a refused result, on their own once the attempt ends
(``POST .../invocation-logs``). They carry what every call cost (every call counts,
a refused result's too: its log carries the refusal's code), so they are resent
while the API is unreachable, as a result is."""

from __future__ import annotations

import logging
import time
from typing import Any

from runtime_worker.api import ApiError, ApiUnavailable, InternalApi, Job, wire_cents
from runtime_worker.backoff import Backoff
from runtime_worker.model import ModelCall
from runtime_worker.pricing import Usage, cost_cents

logger = logging.getLogger("runtime_worker")


def entry(job: Job, call: ModelCall) -> dict[str, Any]:
    usage = call.usage or Usage()
    return {
        "attemptNo": job.attempt_no,
        "provider": job.model_provider,
        "modelName": call.model_name,
        "requestId": call.request_id or f"{job.job_id}-{job.attempt_no}-{id(call)}",
        "startedAt": call.started_at.isoformat(),
        "latencyMs": call.latency_ms,
        "httpStatus": call.http_status,
        "promptTokens": usage.prompt_tokens,
        "completionTokens": usage.completion_tokens,
        "totalTokens": usage.total_tokens,
        "costCents": wire_cents(cost_cents(call.model_name, usage)),
        "errorCode": call.error_code,
    }


def send(
    api: InternalApi,
    job: Job,
    calls: list[ModelCall],
    *,
    log: logging.Logger | logging.LoggerAdapter[Any] = logger,
    until: float | None = None,
    hard_stop_at: float | None = None,
) -> None:
    """Send the logs, retrying while the API is unreachable until ``until`` (a
    ``time.monotonic()``; once when None) or a shutdown's ``hard_stop_at``."""
    if not calls:
        return
    logs = [entry(job, call) for call in calls]
    backoff = Backoff(first=0.2, most=5.0)
    give_up = min(t for t in (until if until is not None else time.monotonic(), hard_stop_at) if t is not None)
    while True:
        try:
            api.invocation_logs(job.job_id, logs)
            return
        except ApiUnavailable as error:
            delay = backoff.next(error.retry_after)
            if time.monotonic() + delay > give_up:
                log.warning("job %s: invocation logs not delivered (%s)", job.job_id, error)
                return
            time.sleep(delay)
        except ApiError as error:
            log.warning("job %s: invocation logs refused: %s", job.job_id, error)
            return
