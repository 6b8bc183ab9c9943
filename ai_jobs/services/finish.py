"""The end of an attempt: its result (validated, stored with its outputs, usage and
notice) or its failure (retried, failed or cancelled by the retry policy)."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ai_jobs import job_types, metrics, output_schemas, transitions
from ai_jobs.models import (
    AiRuntimeJob,
    AiRuntimeResult,
    ApiKeyMode,
    JobStatus,
)
from ai_jobs.notifications import FinishedJob, notification_write_failed, notification_write_succeeded
from ai_jobs.services.handout import cancel_for_withdrawn_consent, refusal
from ai_jobs.services.invocation_logs import invocation_logs_none, invocation_logs_store
from config.errors import DomainError, ErrorCode, RuntimeErrorCode
from config.sql import insert_rows
from quotas import services as quotas


@dataclass(frozen=True)
class SubmittedResult:
    job_id: str
    result_id: str
    duplicate: bool


def result_submit(
    *,
    job_id: str,
    instance_id: str,
    attempt_no: int,
    output_schema_version: str | None,
    output: dict[str, Any],
    usage: dict[str, int],
    cost_cents: Decimal,
    invocation_logs: Sequence[dict[str, Any]] | None = None,
) -> SubmittedResult:
    """Accept a job's output: validated against its schema, stored once under
    ``jobId:attemptNo:outputHash`` in the same transaction as the job's move to
    ``succeeded``, with its records, its usage, the breaker's success, the user's
    notice and the attempt's ``invocation_logs`` (stored as ``invocation-logs`` would
    store them). A resubmission of the same output answers as a duplicate and stores
    nothing, logs included. A job whose consent was withdrawn ends ``cancelled``
    instead, with nothing stored. An attempt that is not the job's current one is
    refused as ``JOB_NOT_ACTIVE`` whatever became of the later attempt:
    ``RESULT_ALREADY_EXISTS`` is only for a different output of the attempt that succeeded.

    The writes are plain statements, in order, inside the transaction: the job's move,
    the result, its outputs, the notice (which may read the outputs back), the usage."""
    digest = output_schemas.output_hash(output)
    key = f"{job_id}:{attempt_no}:{digest}"
    now = timezone.now()
    with transaction.atomic():
        job = transitions.succeed(job_id=job_id, instance_id=instance_id, attempt_no=attempt_no, now=now)
        if job is not None:
            version = output_schema_version or job.output_schema_version or output_schemas.DEFAULT_VERSION
            _check_output(job.job_type, version, output)
            prompt, completion = int(usage.get("promptTokens", 0)), int(usage.get("completionTokens", 0))
            result = AiRuntimeResult(
                job=job,
                attempt_no=attempt_no,
                idempotency_key=key,
                output_hash=digest,
                output_schema_version=version,
                output=output,
                prompt_tokens=prompt,
                completion_tokens=completion,
                total_tokens=int(usage.get("totalTokens") or prompt + completion),
                cost_cents=cost_cents,
                runtime_instance_id=instance_id,
                created_at=now,
            )
            insert_rows(AiRuntimeResult, [{field.attname: getattr(result, field.attname) for field in _RESULT_FIELDS}])
            result_persist(job=job, result=result)
            # Calls that did not end in this result count too, in the same usage statement as it.
            calls = (
                invocation_logs_store(
                    job=job, instance_id=instance_id, logs=invocation_logs, now=now, field="invocationLogs"
                )
                if invocation_logs
                else invocation_logs_none()
            )
            quotas.usage_record_result(
                user_id=job.user_id,
                quota_date=job.quota_date,
                api_key_mode=job.api_key_mode,
                total_tokens=result.total_tokens + calls.tokens,
                cost_cents=result.cost_cents + calls.cost_cents,
            )
            metrics.jobs_finished(status=JobStatus.SUCCEEDED, job_types=[job.job_type])
            metrics.tokens_reported(api_key_mode=job.api_key_mode, tokens=result.total_tokens + calls.tokens)
            return SubmittedResult(job_id=job_id, result_id=result.id, duplicate=False)
    existing = AiRuntimeResult.objects.filter(job_id=job_id).only("id", "idempotency_key", "attempt_no").first()
    if existing is None:
        # Consent withdrawn while the model ran: nothing is stored, published or charged.
        raise cancel_for_withdrawn_consent(job_id, instance_id, attempt_no)
    if existing.idempotency_key == key:
        return SubmittedResult(job_id=job_id, result_id=existing.id, duplicate=True)
    if existing.attempt_no == attempt_no:
        raise DomainError(ErrorCode.RESULT_ALREADY_EXISTS, f"Job {job_id} already has a different result")
    # Another attempt's result, whatever it holds: this attempt is stale, its lease long over.
    raise refusal(job_id, instance_id, attempt_no)


_RESULT_FIELDS = AiRuntimeResult._meta.concrete_fields


def result_persist(*, job: AiRuntimeJob, result: AiRuntimeResult) -> None:
    """Store an accepted result as its job type's outputs, and the user's notice,
    inside the result's transaction: a result that is rolled back leaves no output
    and no notice, and the notice is seen when the result commits."""
    declared = job_types.get(job.job_type)
    if declared is None:  # a job of a type removed since it was created
        raise DomainError(ErrorCode.RESULT_SCHEMA_UNSUPPORTED, f"Job type {job.job_type} is not registered")
    stored = declared.store(job, result.output, result)
    notification_write_succeeded(job=job, stored=stored, pushed=job.user_has_devices)


def _check_output(job_type: str, version: str, output: dict[str, Any]) -> None:
    declared = job_types.get(job_type)
    try:
        if declared is None:
            raise output_schemas.UnknownSchema(job_type)
        errors = declared.validation_errors(version, output)
    except output_schemas.UnknownSchema:
        known = declared.schema_versions() if declared is not None else output_schemas.versions()
        raise DomainError(
            ErrorCode.RESULT_SCHEMA_UNSUPPORTED,
            f"Output schema {version} of {job_type} is not supported; known: {', '.join(known)}",
        ) from None
    if errors:
        raise DomainError(ErrorCode.RESULT_SCHEMA_UNSUPPORTED, "Output does not match its schema: " + "; ".join(errors))


def retry_delay(attempt_no: int) -> dt.timedelta:
    """Exponential backoff with equal jitter: half the step is fixed, half random,
    so runtimes failing together do not come back together."""
    step = min(
        settings.AI_JOB_RETRY_BACKOFF_MAX_SECONDS,
        settings.AI_JOB_RETRY_BACKOFF_BASE_SECONDS * 2 ** min(max(0, attempt_no - 1), 30),
    )
    return dt.timedelta(seconds=step / 2 + random.uniform(0, step / 2))


@dataclass(frozen=True)
class FailOutcome:
    job_id: str
    status: str
    retry_count: int


def job_fail(*, job_id: str, instance_id: str, attempt_no: int, error_code: str, error_message: str) -> FailOutcome:
    """A runtime reports a failure; whether its error code is retryable decides (``RuntimeErrorCode``).
    The same failure sent again once it was taken (its answer lost) answers what it did."""
    code = RuntimeErrorCode.from_code(error_code)
    now = timezone.now()
    with transaction.atomic():
        moved = transitions.fail(
            job_id=job_id,
            instance_id=instance_id,
            attempt_no=attempt_no,
            error_code=code.code,
            error_message=error_message[:4000],
            retryable=code.retryable,
            cancelled=code is RuntimeErrorCode.JOB_CANCELLED,
            retry_at=now + retry_delay(attempt_no),
            now=now,
        )
        if moved is not None and moved.status == JobStatus.FAILED:  # final: the user's notice, in its transaction
            notification_write_failed(
                jobs=[FinishedJob(job_id, moved.user_id, moved.job_type, moved.target_type, moved.target_id, code.code)]
            )
    if moved is None:
        taken = _fail_taken(job_id=job_id, instance_id=instance_id, attempt_no=attempt_no, code=code)
        if taken is not None:
            return taken
        raise refusal(job_id, instance_id, attempt_no)
    if moved.api_key_mode == ApiKeyMode.PLATFORM_KEY and code.code in quotas.MODEL_FAILURE_CODES:
        quotas.breaker_record_failure()
    if moved.status in (JobStatus.FAILED, JobStatus.CANCELLED):
        metrics.jobs_finished(status=moved.status, job_types=[moved.job_type], error_code=code.code)
    return FailOutcome(job_id=job_id, status=moved.status, retry_count=moved.retry_count)


def _fail_taken(*, job_id: str, instance_id: str, attempt_no: int, code: RuntimeErrorCode) -> FailOutcome | None:
    """The outcome of this very failure, taken before (the same attempt and code), while
    the job has begun no other attempt; None when it is not that. Read on the refusal's
    path only: a first failure never pays for it. Where the job stands must be a place
    this failure could have moved it to, so an expiry by the reaper is not taken for it."""
    job = (
        AiRuntimeJob.objects.filter(id=job_id)
        .only("status", "attempt_no", "error_code", "retry_count", "locked_by")
        .first()
    )
    if job is None or job.attempt_no != attempt_no or job.error_code != code.code:
        return None
    if code is RuntimeErrorCode.JOB_CANCELLED:
        could = {JobStatus.CANCELLED}
    elif code.retryable:
        could = {JobStatus.PENDING, JobStatus.FAILED, JobStatus.CANCELLED}
    else:
        could = {JobStatus.FAILED, JobStatus.CANCELLED}
    # A failure that ends the job keeps its holder; one sent back to pending leaves none.
    holder = job.locked_by is None if job.status == JobStatus.PENDING else job.locked_by == instance_id
    if job.status not in could or not holder:
        return None
    return FailOutcome(job_id=job_id, status=job.status, retry_count=job.retry_count)
