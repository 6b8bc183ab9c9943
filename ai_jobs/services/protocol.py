"""The runtime protocol (seed 000, contract §3): lock, claim, heartbeat, snapshot,
credential, result, fail, invocation logs. Status changes go through
``ai_jobs.transitions`` and nowhere else."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from accounts.selectors import user_known_as
from ai_jobs import held, job_types, metrics, output_schemas, queries, selectors, transitions
from ai_jobs.models import (
    ACTIVE_STATUSES,
    AiRuntimeJob,
    AiRuntimeResult,
    ApiKeyMode,
    JobStatus,
)
from ai_jobs.notifications import FinishedJob, notification_write_failed, notification_write_succeeded
from ai_jobs.services.invocation_logs import invocation_logs_none, invocation_logs_store
from ai_jobs.snapshots import snapshot_create
from config.errors import DomainError, ErrorCode, RuntimeErrorCode
from config.sql import execute, insert_rows
from credentials.services import credential_unseal
from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import CircuitState

logger = logging.getLogger(__name__)


def _lease() -> dt.timedelta:
    return dt.timedelta(seconds=settings.AI_JOB_LOCK_SECONDS)


# --- the runtime protocol ----------------------------------------------------------------


def _refuse(job_id: str, instance_id: str, attempt_no: int | None = None) -> DomainError:
    """Why a holder-only transition matched no row: the job is missing, or not
    active for this caller. Only ever read on the error path."""
    job = (
        AiRuntimeJob.objects.filter(id=job_id)
        .only("status", "locked_by", "lock_until", "deadline_ms", "attempt_no")
        .first()
    )
    if job is None:
        return DomainError(ErrorCode.JOB_NOT_FOUND, f"Job {job_id} does not exist")
    if job.status not in ACTIVE_STATUSES:
        reason = f"job is {job.status}"
    elif job.locked_by != instance_id:
        reason = "the job is locked by another runtime instance"
    elif job.lock_until is None or job.lock_until < (now := timezone.now()):
        reason = "the lease lapsed"
    elif job.deadline_ms is not None and job.deadline_ms < now.timestamp() * 1000:
        reason = "the attempt ran past its timeoutSeconds"
    elif attempt_no is not None and attempt_no != job.attempt_no:
        reason = f"attempt {attempt_no} is not the current attempt {job.attempt_no}"
    else:  # it changed between the statement and this read
        reason = "the job changed state concurrently"
    return DomainError(ErrorCode.JOB_NOT_ACTIVE, f"Job {job_id} is not active for this runtime: {reason}")


def job_lock(*, job_id: str, instance_id: str) -> AiRuntimeJob:
    now = timezone.now()
    job = transitions.lock(job_id=job_id, instance_id=instance_id, now=now, lease=_lease())
    if job is not None:
        return job
    current = AiRuntimeJob.objects.filter(id=job_id).only("status", "available_at", "locked_by", "api_key_mode").first()
    if current is None:
        raise DomainError(ErrorCode.JOB_NOT_FOUND, f"Job {job_id} does not exist")
    if current.status in ACTIVE_STATUSES:
        raise DomainError(ErrorCode.JOB_ALREADY_LOCKED, f"Job {job_id} is locked by another runtime")
    if current.status == JobStatus.PENDING and current.available_at > now:
        raise DomainError(
            ErrorCode.JOB_NOT_ACTIVE, f"Job {job_id} is waiting for a retry until {current.available_at.isoformat()}"
        )
    if current.status == JobStatus.PENDING and current.api_key_mode == ApiKeyMode.PLATFORM_KEY:
        locked = _trial(
            lambda free: _listed(
                transitions.lock(job_id=job_id, instance_id=instance_id, now=now, lease=_lease(), trial=True)
            )
        )
        if locked:
            return locked[0]
        state = quota_selectors.breaker_get().state
        if state == CircuitState.HALF_OPEN:
            raise DomainError(
                ErrorCode.JOB_NOT_ACTIVE,
                f"Job {job_id} waits in pending: the platform circuit breaker is half-open and its "
                f"{settings.PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS} trial platform-key jobs are running",
            )
        if state == CircuitState.OPEN:
            raise DomainError(
                ErrorCode.JOB_NOT_ACTIVE,
                f"Job {job_id} waits in pending: the platform circuit breaker is open, so platform-key jobs are not handed out",
            )
    raise DomainError(ErrorCode.JOB_NOT_ACTIVE, f"Job {job_id} is {current.status}")


def _listed(job: AiRuntimeJob | None) -> list[AiRuntimeJob]:
    return [job] if job is not None else []


def _trial(take: Callable[[int], list[AiRuntimeJob]]) -> list[AiRuntimeJob]:
    """While the breaker is half-open: ``take(free)`` platform-key jobs, ``free`` being
    how many more may be locked/running (``PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS`` at
    most), decided under the breaker row's lock, so runtimes claiming at once never
    exceed it. Nothing when it is not half-open, or no trial is free."""
    with transaction.atomic():
        if not quotas.breaker_lock_half_open():
            return []
        free = settings.PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS - selectors.leased_platform_jobs()
        return take(free) if free > 0 else []


def job_claim(*, job_types: Sequence[str], limit: int, instance_id: str, start: bool = False) -> list[AiRuntimeJob]:
    """One statement, atomic on its own: picking and locking happen together. While
    the breaker is half-open, a second step adds trial platform-key jobs. ``start``:
    the jobs go straight to ``running`` (the fast path, ``job_claim_started``)."""
    limit, now = min(limit, selectors.POLL_MAX), timezone.now()
    jobs = transitions.claim(
        job_types=job_types, limit=limit, instance_id=instance_id, now=now, lease=_lease(), start=start
    )
    if len(jobs) < limit and job_types and quota_selectors.breaker_state_hint() == CircuitState.HALF_OPEN:
        jobs += _trial(
            lambda free: transitions.claim(
                job_types=job_types,
                limit=min(free, limit - len(jobs)),
                instance_id=instance_id,
                now=now,
                lease=_lease(),
                trial=True,
                start=start,
            )
        )
        jobs.sort(key=lambda job: (job.priority, job.created_at, job.id))
    return jobs


@dataclass(frozen=True)
class StartedJob:
    """A job of the claim fast path: ``running``, with the body ``GET .../snapshot``
    gives (``snapshot``, JSON text) and the key ``POST .../credential`` gives, as asked."""

    job: AiRuntimeJob
    snapshot: str | None
    credential: ResolvedCredential | None


def job_claim_started(
    *, job_types: Sequence[str], limit: int, instance_id: str, snapshot: bool, credential: bool
) -> list[StartedJob]:
    """Claim with ``include`` (contract §3): the claim, then one read of every claimed
    job's consent, snapshot text and credential columns. Each job gets what the
    separate calls would give, under the same rules: a job whose consent was withdrawn
    ends ``cancelled`` (the snapshot call's ``JOB_NOT_ACTIVE``, after which a runtime
    drops it); a credential that cannot be resolved fails the job with
    ``CREDENTIAL_RESOLVE_FAILED``, as the reference runtime reports it. Neither is in
    the answer."""
    jobs = job_claim(job_types=job_types, limit=limit, instance_id=instance_id, start=True)
    now = timezone.now()
    rows = held.claimed_jobs(
        job_ids=[job.id for job in jobs], instance_id=instance_id, now=now, snapshot=snapshot, credential=credential
    )
    started = []
    for job in jobs:
        row = rows.get(job.id)
        if row is None:  # gone since the claim (a user deleted meanwhile)
            continue
        if not row.consents:
            _withdrawn(job.id, instance_id)
            continue
        resolved = None
        if credential:
            try:
                resolved = _resolved(row)
            except DomainError as error:
                with contextlib.suppress(DomainError):  # changed meanwhile (cancelled): it is not ours to fail
                    job_fail(
                        job_id=job.id,
                        instance_id=instance_id,
                        attempt_no=job.attempt_no,
                        error_code=RuntimeErrorCode.CREDENTIAL_RESOLVE_FAILED.code,
                        error_message=f"Credential not resolved: {error.code.code}: {error}",
                    )
                continue
        text = None
        if snapshot:
            try:
                text = _snapshot_text(row, now)
            except DomainError:
                # Handed out without it: the runtime asks GET .../snapshot, whose answer says
                # why, and the other jobs of the claim are not lost with this one's error.
                logger.warning("job %s claimed without its snapshot: it could not be built", job.id)
        started.append(StartedJob(job=job, snapshot=text, credential=resolved))
    return started


def job_heartbeat(*, job_id: str, instance_id: str) -> transitions.Heartbeat:
    beat = transitions.heartbeat(job_id=job_id, instance_id=instance_id, now=timezone.now(), lease=_lease())
    if beat is None:
        raise _refuse(job_id, instance_id)
    return beat


def _held(job_id: str, instance_id: str, *, snapshot: bool = False, credential: bool = False) -> held.HeldJob:
    """The job, for the holder of its live attempt, while its user's consent holds, in
    one statement: once consent no longer holds, the job ends ``cancelled`` here and
    the caller gets ``409 JOB_NOT_ACTIVE`` (consent holds for the job's whole life).
    The attempt's first snapshot or credential call starts it, as a heartbeat would:
    one more statement, once an attempt, for a runtime that asks before it heartbeats
    (a heartbeat that started it meanwhile leaves nothing to do)."""
    now = timezone.now()
    job = held.held_job(job_id=job_id, instance_id=instance_id, now=now, snapshot=snapshot, credential=credential)
    if job is None:
        raise _refuse(job_id, instance_id)
    if not job.consents:
        raise _withdrawn(job_id, instance_id)
    if job.status == JobStatus.LOCKED:
        transitions.start(job_id=job_id, instance_id=instance_id, attempt_no=job.attempt_no, now=now)
    return job


def _withdrawn(job_id: str, instance_id: str, attempt_no: int | None = None) -> DomainError:
    """End a held job whose consent was withdrawn; the error to answer with."""
    cancelled = transitions.cancel_withdrawn(
        job_id=job_id, instance_id=instance_id, now=timezone.now(), attempt_no=attempt_no
    )
    if cancelled is None:  # it changed meanwhile: say what it is now
        return _refuse(job_id, instance_id, attempt_no)
    metrics.jobs_finished(status=JobStatus.CANCELLED, job_types=[cancelled], error_code="JOB_CANCELLED")
    logger.info("job %s cancelled: its user withdrew consent while runtime %s held it", job_id, instance_id)
    return DomainError(
        ErrorCode.JOB_NOT_ACTIVE,
        f"Job {job_id} is cancelled: its user cancelled it or turned AI analysis off",
    )


def job_snapshot(*, job_id: str, instance_id: str) -> str:
    """The body of ``GET .../snapshot`` (JSON text, the stored ``data`` as it is),
    rebuilt when missing or expired (seed 002 v1.1), while its user's consent holds."""
    return _snapshot_text(_held(job_id, instance_id, snapshot=True), timezone.now())


def _snapshot_text(job: held.HeldJob, now: dt.datetime) -> str:
    snapshot = job.snapshot
    if snapshot is None or snapshot.expires_at <= now:
        user = (
            get_user_model().objects.select_related("account").get(pk=job.user_id)
            if job.user_public_id is None
            else user_known_as(user_id=job.user_id, public_id=job.user_public_id)  # both read with the job
        )
        built = snapshot_create(
            user=user, target_type=job.target_type, target_id=job.target_id, timezone_name=job.timezone_name
        )
        execute(queries.SET_SNAPSHOT, {"snapshot_id": built.id, "now": timezone.now(), "job_id": job.id})
        snapshot = held.SnapshotRow(
            id=built.id,
            target_type=built.target_type,
            target_id=built.target_id,
            schema_version=built.schema_version,
            created_at=built.created_at,
            expires_at=built.expires_at,
            payload_text=built.payload_text,
        )
    return held.snapshot_body(job_id=job.id, user_public_id=job.user_public_id, snapshot=snapshot)


@dataclass(frozen=True)
class ResolvedCredential:
    api_key_mode: str
    provider: str
    base_url: str
    model_name: str
    api_key: str

    def __repr__(self) -> str:  # never let the key reach a log through a repr
        return f"ResolvedCredential({self.api_key_mode}, {self.provider}, {self.base_url}, {self.model_name}, ****)"


def job_credential(*, job_id: str, instance_id: str) -> ResolvedCredential:
    """The model key for the job, only to the instance holding its lease: one
    statement reads the job, its consent and its credential's sealed key."""
    return _resolved(_held(job_id, instance_id, credential=True))


def _resolved(job: held.HeldJob) -> ResolvedCredential:
    if job.api_key_mode == ApiKeyMode.PLATFORM_KEY:
        if not settings.PLATFORM_DEEPSEEK_API_KEY:
            raise DomainError(ErrorCode.CREDENTIAL_NOT_FOUND, "No platform model key is configured")
        provider, base_url, api_key = job.model_provider, settings.DEEPSEEK_BASE_URL, settings.PLATFORM_DEEPSEEK_API_KEY
    else:
        if not job.credential_id:
            raise DomainError(ErrorCode.CREDENTIAL_REQUIRED, "The job uses a user key but names no credential")
        # The credentials app decrypts the user's key: CREDENTIAL_NOT_FOUND when missing,
        # deleted or another user's; CREDENTIAL_RESOLVE_FAILED (never a wrong key) when it
        # does not decrypt.
        user_key = credential_unseal(user_id=job.user_id, credential_id=job.credential_id, row=job.credential_row)
        provider, base_url, api_key = user_key.provider, user_key.base_url, user_key.api_key
    return ResolvedCredential(
        api_key_mode=job.api_key_mode, provider=provider, base_url=base_url, model_name=job.model_name, api_key=api_key
    )


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
    instead, with nothing stored.

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
            # Calls that did not end in this result count too (contract §3), in one usage statement with it.
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
    existing = AiRuntimeResult.objects.filter(job_id=job_id).only("id", "idempotency_key").first()
    if existing is None:
        # Consent withdrawn while the model ran: nothing is stored, published or charged.
        raise _withdrawn(job_id, instance_id, attempt_no)
    if existing.idempotency_key == key:
        return SubmittedResult(job_id=job_id, result_id=existing.id, duplicate=True)
    raise DomainError(ErrorCode.RESULT_ALREADY_EXISTS, f"Job {job_id} already has a different result")


_RESULT_FIELDS = AiRuntimeResult._meta.concrete_fields


def result_persist(*, job: AiRuntimeJob, result: AiRuntimeResult) -> None:
    """Store an accepted result as its job type's outputs, and the user's notice,
    inside the result's transaction: a result that is rolled back leaves no output
    and no notice, and the notice is seen when the result commits."""
    declared = job_types.get(job.job_type)
    if declared is None:  # a job of a type removed since it was created
        raise DomainError(ErrorCode.RESULT_SCHEMA_UNSUPPORTED, f"Job type {job.job_type} is not registered")
    stored = declared.store(job, result.output, result)
    notification_write_succeeded(job=job, stored=stored)


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
    """A runtime reports a failure; the retryable column of seed 002 §1.3 decides."""
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
        raise _refuse(job_id, instance_id, attempt_no)
    if moved.api_key_mode == ApiKeyMode.PLATFORM_KEY and code.code in quotas.MODEL_FAILURE_CODES:
        quotas.breaker_record_failure()
    if moved.status in (JobStatus.FAILED, JobStatus.CANCELLED):
        metrics.jobs_finished(status=moved.status, job_types=[moved.job_type], error_code=code.code)
    return FailOutcome(job_id=job_id, status=moved.status, retry_count=moved.retry_count)
