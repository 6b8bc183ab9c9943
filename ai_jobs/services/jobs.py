"""Creating jobs and operating on them: create, rerun, cancel."""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.utils import timezone

from ai_jobs import metrics, selectors, transitions
from ai_jobs.models import (
    AiJobSnapshot,
    AiRuntimeJob,
    ApiKeyMode,
    JobStatus,
)
from config.errors import DomainError, ErrorCode
from config.sql import insert_rows
from delivery.services import push
from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import UserAiSettings

logger = logging.getLogger(__name__)


# --- creating and operating on jobs ---------------------------------------------------


def job_create(
    *,
    user: AbstractBaseUser,
    job_type: str,
    target_type: str,
    target_id: str,
    api_key_mode: str = ApiKeyMode.PLATFORM_KEY,
    credential_id: str | None = None,
    idempotency_key: str | None = None,
    priority: int = 0,
    params: dict[str, Any] | None = None,
    snapshot: AiJobSnapshot | None = None,
    retried_from: AiRuntimeJob | None = None,
    max_retry_count: int | None = None,
    timeout_seconds: int | None = None,
    quota_date: dt.date | None = None,
) -> AiRuntimeJob:
    """Insert a pending job. The user-facing checks (quotas, breaker) wrap this."""
    job = AiRuntimeJob(
        user=user,
        job_type=job_type,
        target_type=target_type,
        target_id=target_id,
        api_key_mode=api_key_mode,
        credential_id=credential_id,
        idempotency_key=idempotency_key,
        priority=priority,
        params=params or {},
        snapshot=snapshot,
        retried_from_job=retried_from,
        quota_date=quota_date,
        model_name=settings.DEEPSEEK_MODEL,
        max_retry_count=settings.AI_JOB_DEFAULT_MAX_RETRY_COUNT if max_retry_count is None else max_retry_count,
        timeout_seconds=settings.AI_JOB_DEFAULT_TIMEOUT_SECONDS if timeout_seconds is None else timeout_seconds,
    )
    _insert([job])
    return job


def _insert(jobs: Sequence[AiRuntimeJob]) -> None:
    # A fixed INSERT (config.sql.insert_rows): the ORM's would be compiled again for every job.
    insert_rows(AiRuntimeJob, [{field.attname: field.pre_save(job, add=True) for field in _JOB_FIELDS} for job in jobs])
    for job in jobs:
        job._state.adding = False
        job._state.db = connection.alias


_JOB_FIELDS = AiRuntimeJob._meta.concrete_fields


# The stand-in model's fault markers (``runtime_worker.standin``: ``[standin:429]``,
# ``[standin:delay=2.5]``, ...), which a rerun leaves behind (docs/operations/admin.md).
_STANDIN_MARKER = re.compile(r"\[standin:[a-z_0-9]+(?:=[0-9.]+)?\]")


def without_standin_markers(value: Any) -> Any:
    """``value`` with every stand-in fault marker taken out of its strings, at any depth."""
    if isinstance(value, str):
        return _STANDIN_MARKER.sub("", value).strip()
    if isinstance(value, dict):
        return {key: without_standin_markers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_standin_markers(item) for item in value]
    return value


@dataclass(frozen=True)
class Reruns:
    """What ``jobs_rerun`` did with each job it was given, by id: rerun (the new job),
    refused (the user's consent is missing), or skipped (not failed, already rerun, or gone)."""

    created: dict[str, AiRuntimeJob]
    refused: dict[str, DomainError]
    skipped: dict[str, DomainError]


@transaction.atomic
def jobs_rerun(*, job_ids: Sequence[str]) -> Reruns:
    """An operator reruns failed jobs: for each, a NEW job that records where it came
    from (``retriedFromJobId``), named on the failed one as its ``rerunAs``; the failed
    one stays as it is, and a second rerun of it is refused. Not for a user who has
    turned AI analysis off: an operator cannot give consent for them. The rerun's params
    lose the stand-in's fault markers: a job failed on purpose by one would only fail
    again. A few statements whatever the number of jobs: the failed rows locked (two
    operators rerunning one job at once: the second finds it rerun), their users'
    consent read at once, the new jobs inserted in one statement, the old ones named in
    another."""
    jobs = list(AiRuntimeJob.objects.select_for_update().filter(id__in=list(job_ids)).order_by("id"))
    found = {job.id for job in jobs}
    skipped = {
        job_id: DomainError(ErrorCode.JOB_NOT_FOUND, f"Job {job_id} does not exist")
        for job_id in job_ids
        if job_id not in found
    }
    refused: dict[str, DomainError] = {}
    candidates = []
    consenting = quota_selectors.ai_analysis_enabled_of(user_ids={job.user_id for job in jobs})
    for job in jobs:
        if job.status != JobStatus.FAILED:
            skipped[job.id] = DomainError(
                ErrorCode.JOB_NOT_ACTIVE, f"Only failed jobs can be rerun; {job.id} is {job.status}"
            )
        elif job.rerun_as_id:
            skipped[job.id] = DomainError(
                ErrorCode.JOB_NOT_ACTIVE, f"Job {job.id} was already rerun as {job.rerun_as_id}"
            )
        elif not consenting[job.user_id]:
            refused[job.id] = DomainError(
                ErrorCode.AI_ANALYSIS_DISABLED,
                f"Job {job.id} was not rerun: its user has AI analysis turned off, and only they can turn it on",
            )
        else:
            candidates.append(job)
    reruns = [
        AiRuntimeJob(
            user_id=job.user_id,
            job_type=job.job_type,
            target_type=job.target_type,
            target_id=job.target_id,
            api_key_mode=job.api_key_mode,
            credential_id=job.credential_id,
            priority=job.priority,
            params=without_standin_markers(job.params),
            retried_from_job_id=job.id,
            model_name=settings.DEEPSEEK_MODEL,
            max_retry_count=job.max_retry_count,
            timeout_seconds=job.timeout_seconds,
        )
        for job in candidates
    ]
    if reruns:
        _insert(reruns)
        named = transitions.record_reruns(jobs=candidates, rerun_ids=[rerun.id for rerun in reruns], now=timezone.now())
        if named != len(candidates):  # the rows were locked and seen failed, never rerun: not reached
            raise DomainError(ErrorCode.JOB_NOT_ACTIVE, "A job was rerun by another operator meanwhile; try again")
    return Reruns(
        created={job.id: rerun for job, rerun in zip(candidates, reruns, strict=True)}, refused=refused, skipped=skipped
    )


def job_rerun(*, job: AiRuntimeJob) -> AiRuntimeJob:
    """One failed job rerun by ``jobs_rerun``'s rules: the new job, or the reason it was not."""
    done = jobs_rerun(job_ids=[job.id])
    if job.id not in done.created:
        raise (done.refused.get(job.id) or done.skipped[job.id])
    rerun = done.created[job.id]
    job.rerun_as, job.updated_at = rerun, timezone.now()
    return rerun


def jobs_cancel(*, job_ids: Sequence[str], reason: str = "Cancelled") -> tuple[int, int]:
    """Pending jobs become ``cancelled`` at once; locked and running ones get
    ``cancelRequested``, which their runtime reads on its next heartbeat. Returns
    (cancelled, cancel requested). One transaction: a database lost between the two
    statements leaves nothing half done."""
    now = timezone.now()
    with transaction.atomic():
        cancelled = transitions.cancel_pending(job_ids=job_ids, now=now, reason=reason)
        metrics.jobs_finished(status=JobStatus.CANCELLED, job_types=cancelled, error_code="JOB_CANCELLED")
        # Pending first: a job locked between the two statements is caught by the second.
        requested = transitions.request_cancel(job_ids=job_ids, now=now)
    return len(cancelled), requested


def job_cancel(*, job_id: str, reason: str = "Cancelled") -> AiRuntimeJob:
    """Cancel one job; cancelling a cancelled job again is not an error, cancelling
    one that succeeded or failed is."""
    cancelled, requested = jobs_cancel(job_ids=[job_id], reason=reason)
    job = selectors.with_public_ids(AiRuntimeJob.objects.filter(id=job_id)).first()
    if job is None:
        raise DomainError(ErrorCode.JOB_NOT_FOUND, f"Job {job_id} does not exist")
    if not (cancelled or requested or job.status == JobStatus.CANCELLED):
        raise DomainError(ErrorCode.JOB_NOT_ACTIVE, f"Job {job_id} is already {job.status}")
    return job


def ai_settings_update(*, user: AbstractBaseUser, by_staff: bool = False, **changes: Any) -> UserAiSettings:
    """Change a user's AI settings (``quotas.services.ai_settings_write``, same
    keywords). Turning AI analysis off withdraws consent: the user's pending jobs are
    cancelled, their running ones asked to stop and their pushes not yet sent dropped,
    in the same transaction as the setting."""
    with transaction.atomic():
        ai_settings = quotas.ai_settings_write(user=user, by_staff=by_staff, **changes)
        if changes.get("ai_analysis_enabled") is False:
            jobs_cancel(job_ids=selectors.open_job_ids(user=user), reason="AI analysis was turned off by the user")
            push.pushes_drop_of_user(user_id=user.pk, reason="AI analysis was turned off by the user")
    return ai_settings
