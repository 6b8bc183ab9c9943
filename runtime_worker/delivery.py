"""What an attempt tells the server at its end: a result or a failure, held and
resent while the API is unreachable, so that work in hand is not lost. The server
decides, by the lease, whether it still counts."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from protocol.errors import RuntimeErrorCode
from runtime_worker.api import ApiError, ApiUnavailable
from runtime_worker.attempt import Abandon, Attempt
from runtime_worker.backoff import Backoff

T = TypeVar("T")


def deliver(
    run: Attempt, what: str, send: Callable[[], T], *, on_refused: Callable[[ApiError], None] | None = None
) -> T:
    """Send a result or a failure, retrying while the API is unreachable. A refusal
    goes to ``on_refused`` first (which may raise); then a refusal because the job is
    no longer ours abandons it, and any other is raised."""
    config = run.runtime.config
    give_up = time.monotonic() + config.submit_retry_seconds
    backoff = Backoff(first=0.2, most=5.0)
    warned = False
    run.delivering = True
    while True:
        try:
            answer = send()
        except ApiUnavailable as error:
            limit = min(give_up, run.runtime.hard_stop_at or give_up)
            delay = backoff.next(error.retry_after)
            if time.monotonic() + delay > limit:
                run.log.error(
                    "job %s: %s not delivered, API unreachable (%s); the lease will lapse and the job be retried",
                    run.job.job_id,
                    what,
                    error,
                )
                raise Abandon(f"{what} undeliverable") from None
            if not warned:
                warned = True
                run.log.warning(
                    "job %s: %s not delivered yet (%s); holding it and retrying", run.job.job_id, what, error
                )
            time.sleep(delay)
            continue
        except ApiError as error:
            if on_refused is not None:
                on_refused(error)
            if error.job_gone:
                raise Abandon(f"{what} refused: {error.code}", code=error.code) from None
            raise
        run.settled = True
        return answer


def report_failure(run: Attempt, code: RuntimeErrorCode, message: str) -> str:
    """Send the attempt's failure; the outcome the runtime counts."""
    job = run.job
    try:
        answer = deliver(
            run,
            "failure",
            lambda: run.api.fail(job.job_id, attempt_no=job.attempt_no, error_code=code.code, error_message=message),
        )
    except Abandon as why:
        run.log.info("job %s: %s not recorded (%s)", job.job_id, code.code, why)
        return "abandoned"
    except ApiError as error:
        run.log.error("job %s: failure %s refused: %s", job.job_id, code.code, error)
        return "abandoned"
    run.log.info("job %s (%s): %s → %s: %s", job.job_id, job.job_type, code.code, answer.get("status"), message)
    return f"failed:{code.code}"
