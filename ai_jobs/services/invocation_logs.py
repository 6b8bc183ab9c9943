"""Invocation logs (contract §3): a runtime's model-call telemetry, and the rule that
every model call counts against the user's and the platform's day."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from ai_jobs import metrics
from ai_jobs.models import AiInvocationLog, AiRuntimeJob
from config.errors import DomainError, ErrorCode
from config.sql import fetch, placeholders
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


def invocation_logs_record(*, job_id: str, instance_id: str, logs: Sequence[dict[str, Any]]) -> int:
    """Store a runtime's model-call telemetry. Logs may come after the result, and
    from a runtime that lost its lease: they are history, not a transition. A log
    sent twice (same job, attempt and request id) is stored once.

    Every model call counts (contract §3): a log with an ``errorCode`` (a call that
    did not end in the accepted result) adds its tokens and cost to the user's day
    and, platform key, the platform's, in the transaction that stores it; only the
    rows this statement inserted count, so a log resent, even concurrently, counts once."""
    job = AiRuntimeJob.objects.filter(id=job_id).only("attempt_no", "api_key_mode", "user_id", "quota_date").first()
    if job is None:
        raise DomainError(ErrorCode.JOB_NOT_FOUND, f"Job {job_id} does not exist")
    bad = {
        str(i): ["attemptNo is not an attempt of this job"]
        for i, log in enumerate(logs)
        if not 1 <= log["attempt_no"] <= job.attempt_no
    }
    if bad:
        raise DomainError(ErrorCode.VALIDATION_ERROR, "A log names an attempt the job never had", fields={"logs": bad})
    now = timezone.now()
    defaults = {"provider": "deepseek", "model_name": "", "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    values: list[Any] = []
    for log in logs:
        fields = {**defaults, **{field: log[field] for field in _LOG_FIELDS if log.get(field) is not None}}
        fields.setdefault("cost_cents", Decimal(0))
        values += [job_id, log["attempt_no"], instance_id, *(fields.get(field) for field in _LOG_FIELDS), now]
    row = f"({placeholders(_LOG_COLUMNS)})"
    with transaction.atomic():
        inserted = fetch(
            f"INSERT INTO {_LOG_TABLE} ({', '.join(_LOG_COLUMNS)}) VALUES {', '.join([row] * len(logs))} "
            "ON CONFLICT DO NOTHING RETURNING total_tokens, cost_cents, error_code",
            values,
        )
        failed = [(int(tokens), Decimal(str(cost))) for tokens, cost, code in inserted if code]
        tokens, cost = sum(t for t, _ in failed), sum((c for _, c in failed), Decimal(0))
        if tokens or cost:
            quotas.usage_record_calls(
                user_id=job.user_id,
                quota_date=job.quota_date,
                api_key_mode=job.api_key_mode,
                total_tokens=tokens,
                cost_cents=cost,
            )
        metrics.tokens_reported(api_key_mode=job.api_key_mode, tokens=tokens)
    return len(logs)
