"""Invocation logs: a runtime's model-call telemetry, and the rule that every model
call counts against the user's and the platform's day."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from ai_jobs import metrics, queries
from ai_jobs.models import AiInvocationLog, AiRuntimeJob
from config.errors import DomainError, ErrorCode
from config.sql import fetch, insert_rows
from quotas import services as quotas

# What a log carries besides its job, attempt and runtime; a field a log leaves out (or
# sends as null) takes the model's default.
_LOG_FIELDS = (
    "provider",
    "model_name",
    "request_id",
    "started_at",
    "latency_ms",
    "http_status",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cost_cents",
    "error_code",
)
_FIELD = {name: AiInvocationLog._meta.get_field(name) for name in _LOG_FIELDS}
_RETURNING = "ON CONFLICT DO NOTHING RETURNING total_tokens, cost_cents, error_code"


@dataclass(frozen=True)
class Calls:
    """The tokens and cost of the stored logs that carry an ``errorCode``: the calls
    that did not end in the accepted result, which count too."""

    tokens: int
    cost_cents: Decimal


def invocation_logs_none() -> Calls:
    return Calls(tokens=0, cost_cents=Decimal(0))


def _fields(log: dict[str, Any]) -> dict[str, Any]:
    return {name: _FIELD[name].get_default() if log.get(name) is None else log[name] for name in _LOG_FIELDS}


def _counted(inserted: Sequence[tuple[Any, ...]]) -> Calls:
    # Only the rows the statement inserted count, so a log resent, even concurrently, counts once.
    failed = [(int(tokens), Decimal(str(cost))) for tokens, cost, code in inserted if code]
    return Calls(tokens=sum(t for t, _ in failed), cost_cents=sum((c for _, c in failed), Decimal(0)))


def _bad_attempts(logs: Sequence[dict[str, Any]], attempt_no: int) -> dict[str, list[str]]:
    return {
        str(i): ["attemptNo is not an attempt of this job"]
        for i, log in enumerate(logs)
        if not 1 <= log["attempt_no"] <= attempt_no
    }


def invocation_logs_store(
    *, job: AiRuntimeJob, instance_id: str, logs: Sequence[dict[str, Any]], now: dt.datetime, field: str = "logs"
) -> Calls:
    """Store logs of a job already in hand (the result's transaction): one
    statement, on PostgreSQL ``queries.RECORD_LOGS`` as for logs sent on their own. A
    log naming an attempt the job never had is a ``400 VALIDATION_ERROR`` on ``field``;
    the caller's transaction then stores nothing."""
    bad = _bad_attempts(logs, job.attempt_no)
    if bad:
        raise DomainError(ErrorCode.VALIDATION_ERROR, "A log names an attempt the job never had", fields={field: bad})
    if connection.vendor == "postgresql":
        return _counted(fetch(queries.RECORD_LOGS, _columns(job.id, instance_id, logs, now)))
    rows = [
        {"job_id": job.id, "attempt_no": log["attempt_no"], "runtime_instance_id": instance_id, **_fields(log),
         "created_at": now}
        for log in logs
    ]  # fmt: skip
    return _counted(insert_rows(AiInvocationLog, rows, suffix=_RETURNING))


def invocation_logs_record(*, job_id: str, instance_id: str, logs: Sequence[dict[str, Any]]) -> int:
    """Store a runtime's model-call telemetry. Logs may come after the result, and
    from a runtime that lost its lease: they are history, not a transition. A log
    sent twice (same job, attempt and request id) is stored once.

    Every model call counts: a log with an ``errorCode`` (a call that
    did not end in the accepted result) adds its tokens and cost to the user's day
    and, platform key, the platform's, in the transaction that stores it.

    On PostgreSQL the usual case is one statement (``queries.RECORD_LOGS``): the logs joined to their job,
    which checks the job and each log's attempt as it inserts; only when fewer rows
    went in than were sent (a missing job, a bad attempt, a resend) is the job read
    to say why. SQLite reads the job first."""
    now = timezone.now()
    with transaction.atomic():
        if connection.vendor == "postgresql":
            inserted = fetch(queries.RECORD_LOGS, _columns(job_id, instance_id, logs, now))
            job = None
            if len(inserted) < len(logs) or any(code for _, _, code in inserted):
                job = _job(job_id)
                if job is None:
                    raise DomainError(ErrorCode.JOB_NOT_FOUND, f"Job {job_id} does not exist")
                bad = _bad_attempts(logs, job.attempt_no)
                if bad:  # the rows that did go in are rolled back with the transaction
                    raise DomainError(
                        ErrorCode.VALIDATION_ERROR, "A log names an attempt the job never had", fields={"logs": bad}
                    )
            calls = _counted(inserted)
        else:
            job = _job(job_id)
            if job is None:
                raise DomainError(ErrorCode.JOB_NOT_FOUND, f"Job {job_id} does not exist")
            calls = invocation_logs_store(job=job, instance_id=instance_id, logs=logs, now=now)
        if job is not None and (calls.tokens or calls.cost_cents):
            quotas.usage_record_calls(
                user_id=job.user_id,
                quota_date=job.quota_date,
                api_key_mode=job.api_key_mode,
                total_tokens=calls.tokens,
                cost_cents=calls.cost_cents,
            )
        if job is not None:
            metrics.tokens_reported(api_key_mode=job.api_key_mode, tokens=calls.tokens)
    return len(logs)


# queries.RECORD_LOGS's arrays, one per field, by the statement's parameter names.
_ARRAYS = {
    "provider": "providers",
    "model_name": "model_names",
    "request_id": "request_ids",
    "started_at": "started_ats",
    "latency_ms": "latencies_ms",
    "http_status": "http_statuses",
    "prompt_tokens": "prompt_tokens",
    "completion_tokens": "completion_tokens",
    "total_tokens": "total_tokens",
    "cost_cents": "costs_cents",
    "error_code": "error_codes",
}


def _columns(job_id: str, instance_id: str, logs: Sequence[dict[str, Any]], now: dt.datetime) -> dict[str, Any]:
    rows = [_fields(log) for log in logs]
    params: dict[str, Any] = {"job_id": job_id, "instance_id": instance_id, "now": now}
    params["attempt_nos"] = [log["attempt_no"] for log in logs]
    params.update({array: [row[name] for row in rows] for name, array in _ARRAYS.items()})
    return params


def _job(job_id: str) -> AiRuntimeJob | None:
    return AiRuntimeJob.objects.filter(id=job_id).only("attempt_no", "api_key_mode", "user_id", "quota_date").first()
