"""The hand-out to the holder of a job's lease: its snapshot and its model key, each
while the job's user's consent holds; once it no longer does, the job ends
``cancelled`` here. Also why a holder-only call matched no job (``refusal``)."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.selectors import user_known_as
from ai_jobs import leases, metrics, queries, transitions
from ai_jobs.models import (
    ACTIVE_STATUSES,
    AiRuntimeJob,
    ApiKeyMode,
    JobStatus,
)
from ai_jobs.snapshots import snapshot_create
from config.errors import DomainError, ErrorCode
from config.sql import execute
from credentials.services import credential_unseal

logger = logging.getLogger(__name__)


def refusal(job_id: str, instance_id: str, attempt_no: int | None = None) -> DomainError:
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


def leased(job_id: str, instance_id: str, *, snapshot: bool = False, credential: bool = False) -> leases.LeasedJob:
    """The job, for the holder of its live attempt, while its user's consent holds, in
    one statement: once consent no longer holds, the job ends ``cancelled`` here and
    the caller gets ``409 JOB_NOT_ACTIVE`` (consent holds for the job's whole life).
    The attempt's first snapshot or credential call starts it, as a heartbeat would:
    one more statement, once an attempt, for a runtime that asks before it heartbeats
    (a heartbeat that started it meanwhile leaves nothing to do). Either shows the
    claim's answer arrived: the claim sent again no longer answers the job."""
    now = timezone.now()
    job = leases.leased_job(job_id=job_id, instance_id=instance_id, now=now, snapshot=snapshot, credential=credential)
    if job is None:
        raise refusal(job_id, instance_id)
    if not job.consents:
        raise cancel_for_withdrawn_consent(job_id, instance_id)
    if job.status == JobStatus.LOCKED:
        transitions.start(job_id=job_id, instance_id=instance_id, attempt_no=job.attempt_no, now=now)
    elif job.claimed:  # started by its claim (``include``), touched now for the first time
        transitions.unclaim(job_id=job_id)
    return job


def cancel_for_withdrawn_consent(job_id: str, instance_id: str, attempt_no: int | None = None) -> DomainError:
    """Cancel a leased job whose consent was withdrawn; the error to answer with."""
    cancelled = transitions.cancel_withdrawn(
        job_id=job_id, instance_id=instance_id, now=timezone.now(), attempt_no=attempt_no
    )
    if cancelled is None:  # it changed meanwhile: say what it is now
        return refusal(job_id, instance_id, attempt_no)
    metrics.jobs_finished(status=JobStatus.CANCELLED, job_types=[cancelled], error_code="JOB_CANCELLED")
    logger.info("job %s cancelled: its user withdrew consent while runtime %s leased it", job_id, instance_id)
    return DomainError(
        ErrorCode.JOB_NOT_ACTIVE,
        f"Job {job_id} is cancelled: its user cancelled it or turned AI analysis off",
    )


def job_snapshot(*, job_id: str, instance_id: str) -> str:
    """The body of ``GET .../snapshot`` (JSON text, the stored ``data`` as it is),
    rebuilt when missing or expired, while its user's consent holds."""
    return snapshot_text(leased(job_id, instance_id, snapshot=True), timezone.now())


def snapshot_text(job: leases.LeasedJob, now: dt.datetime) -> str:
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
        snapshot = leases.SnapshotRow(
            id=built.id,
            target_type=built.target_type,
            target_id=built.target_id,
            schema_version=built.schema_version,
            created_at=built.created_at,
            expires_at=built.expires_at,
            payload_text=built.payload_text,
        )
    return leases.snapshot_body(job_id=job.id, user_public_id=job.user_public_id, snapshot=snapshot)


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
    return resolve_credential(leased(job_id, instance_id, credential=True))


def resolve_credential(job: leases.LeasedJob) -> ResolvedCredential:
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
