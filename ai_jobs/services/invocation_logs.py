"""Invocation logs (contract §3): a runtime's model-call telemetry, and the rule that
every model call counts against the user's and the platform's day."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from ai_jobs import metrics
from ai_jobs.models import AiInvocationLog, AiRuntimeJob
from config.errors import DomainError, ErrorCode
from config.sql import adapt, fetch, placeholders
from quotas import services as quotas

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


_LOG_TABLE = AiInvocationLog._meta.db_table
_LOG_COLUMNS = ("job_id", "attempt_no", "runtime_instance_id", *_LOG_FIELDS, "created_at")
_JOB_TABLE = AiRuntimeJob._meta.db_table
_DEFAULTS = {"provider": "deepseek", "model_name": "", "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


@dataclass(frozen=True)
class Calls:
    """The tokens and cost of the stored logs that carry an ``errorCode``: the calls
    that did not end in the accepted result, which count too."""

    tokens: int
    cost_cents: Decimal


def invocation_logs_none() -> Calls:
    return Calls(tokens=0, cost_cents=Decimal(0))


def _values(job_id: str, instance_id: str, logs: Sequence[dict[str, Any]], now: dt.datetime) -> list[Any]:
    values: list[Any] = []
    for log in logs:
        fields = {**_DEFAULTS, **{field: log[field] for field in _LOG_FIELDS if log.get(field) is not None}}
        fields.setdefault("cost_cents", Decimal(0))
        values += [job_id, log["attempt_no"], instance_id, *(fields.get(field) for field in _LOG_FIELDS), now]
    return [adapt(value) for value in values]


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


_ROW = f"({placeholders(_LOG_COLUMNS)})"
_RETURNING = "RETURNING total_tokens, cost_cents, error_code"


def invocation_logs_store(
    *, job: AiRuntimeJob, instance_id: str, logs: Sequence[dict[str, Any]], now: dt.datetime, field: str = "logs"
) -> Calls:
    """Store logs of a job already in hand (the result's transaction): one
    statement. A log naming an attempt the job never had is a ``400
    VALIDATION_ERROR`` on ``field``; the caller's transaction then stores nothing."""
    bad = _bad_attempts(logs, job.attempt_no)
    if bad:
        raise DomainError(ErrorCode.VALIDATION_ERROR, "A log names an attempt the job never had", fields={field: bad})
    inserted = fetch(
        f"INSERT INTO {_LOG_TABLE} ({', '.join(_LOG_COLUMNS)}) VALUES {', '.join([_ROW] * len(logs))} "
        f"ON CONFLICT DO NOTHING {_RETURNING}",
        _values(job.id, instance_id, logs, now),
    )
    return _counted(inserted)


_CASTS: dict[str, str] = {}


def _typed_row() -> str:
    """A row of ``VALUES`` whose columns PostgreSQL need not guess: each cast to its column's type."""
    if "row" not in _CASTS:
        fields = {f.column: f for f in AiInvocationLog._meta.concrete_fields}
        _CASTS["row"] = "(" + ", ".join(f"CAST(%s AS {fields[c].db_type(connection)})" for c in _LOG_COLUMNS) + ")"
    return _CASTS["row"]


def invocation_logs_record(*, job_id: str, instance_id: str, logs: Sequence[dict[str, Any]]) -> int:
    """Store a runtime's model-call telemetry. Logs may come after the result, and
    from a runtime that lost its lease: they are history, not a transition. A log
    sent twice (same job, attempt and request id) is stored once.

    Every model call counts (contract §3): a log with an ``errorCode`` (a call that
    did not end in the accepted result) adds its tokens and cost to the user's day
    and, platform key, the platform's, in the transaction that stores it.

    On PostgreSQL the usual case is ONE statement: the logs joined to their job,
    which checks the job and each log's attempt as it inserts; only when fewer rows
    went in than were sent (a missing job, a bad attempt, a resend) is the job read
    to say why. SQLite reads the job first."""
    now = timezone.now()
    with transaction.atomic():
        if connection.vendor == "postgresql":
            inserted = fetch(
                f"INSERT INTO {_LOG_TABLE} ({', '.join(_LOG_COLUMNS)}) SELECT v.* FROM (VALUES "
                f"{', '.join([_typed_row()] * len(logs))}) AS v ({', '.join(_LOG_COLUMNS)}) "
                f"JOIN {_JOB_TABLE} j ON j.id = v.job_id WHERE v.attempt_no BETWEEN 1 AND j.attempt_no "
                f"ON CONFLICT DO NOTHING {_RETURNING}",
                _values(job_id, instance_id, logs, now),
            )
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


def _job(job_id: str) -> AiRuntimeJob | None:
    return AiRuntimeJob.objects.filter(id=job_id).only("attempt_no", "api_key_mode", "user_id", "quota_date").first()
