"""``POST /ai/jobs``: its steps, in order, each refusal with its own code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from accounts.selectors import public_id_of, resolve_me
from ai_jobs import job_types, queries, selectors
from ai_jobs.models import AiRuntimeJob, ApiKeyMode, TargetType
from ai_jobs.services.jobs import job_create
from ai_jobs.snapshots import snapshot_create
from config.errors import DomainError, ErrorCode
from config.sql import fetch
from credentials.selectors import credential_get_for_user
from learning.selectors import target_exists_for_user
from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import CircuitState


def _platform_admit() -> str:
    """The day's budgets, then the breaker and (half-open) the trial jobs already
    active. Returns the breaker's state. While today's budget is used up its own code
    is the answer, though going over it opened the breaker; once the day has turned an
    open breaker answers PLATFORM_CIRCUIT_OPEN."""
    state = quotas.platform_admit()
    if state == CircuitState.HALF_OPEN:
        quotas.half_open_admit(active_platform_jobs=selectors.active_platform_jobs())
    return state


@dataclass(frozen=True)
class SubmittedJob:
    job: AiRuntimeJob
    created: bool


def _existing(
    *, user: AbstractBaseUser, job_type: str, target_type: str, target_id: str, key: str | None
) -> AiRuntimeJob | None:
    if not key:
        return None
    # A fixed probe first: the usual answer is "none", and the full row (with its
    # public ids) is built by the ORM only for the repeat that finds one.
    probe = {"user_id": user.pk, "job_type": job_type, "target_type": target_type, "target_id": target_id, "key": key}
    if not fetch(queries.IDEMPOTENT_PROBE, probe):
        return None
    return selectors.with_public_ids(
        AiRuntimeJob.objects.filter(
            user=user, job_type=job_type, target_type=target_type, target_id=target_id, idempotency_key=key
        )
    ).first()


def job_submit(
    *,
    user: AbstractBaseUser,
    job_type: str,
    target_type: str,
    target_id: str,
    api_key_mode: str | None = None,
    credential_id: str | None = None,
    idempotency_key: str | None = None,
    priority: int = 0,
    params: dict[str, Any] | None = None,
) -> SubmittedJob:
    """A user asks for an analysis. Each refusal carries its own error code, checked in this order."""
    # 2. the job type
    declared = job_types.get(job_type)
    if declared is None:
        raise DomainError(ErrorCode.INVALID_JOB_TYPE, f"jobType must be one of {', '.join(job_types.names())}")
    # 3. the target type fits the job type, and the target is the user's ("me", or
    # their own public id, for a user target)
    if target_type not in declared.target_types:
        raise DomainError(
            ErrorCode.INVALID_TARGET_TYPE,
            f"{job_type} takes targetType {' or '.join(sorted(declared.target_types))}",
        )
    if target_type == TargetType.USER:
        target_id = resolve_me(user, target_id)
    if not target_exists_for_user(user=user, target_type=target_type, target_id=target_id):
        raise DomainError(ErrorCode.NOT_FOUND, f"{target_type} {target_id} not found")
    # 4. AI analysis enabled (read with the day's usage of step 7, in one statement)
    quota_state = quota_selectors.quota_state_get(user_id=user.pk)
    ai_settings = quota_state.ai_settings
    if not ai_settings.ai_analysis_enabled:
        raise DomainError(ErrorCode.AI_ANALYSIS_DISABLED, "AI analysis is turned off in the user's settings")
    # 5. idempotency: the same request again answers the job it made
    found = _existing(user=user, job_type=job_type, target_type=target_type, target_id=target_id, key=idempotency_key)
    if found is not None:
        return SubmittedJob(job=found, created=False)
    # 6. the key mode and its credential
    mode = api_key_mode or ai_settings.default_api_key_mode
    if mode == ApiKeyMode.USER_DEEPSEEK_KEY:
        if not credential_id:
            raise DomainError(ErrorCode.CREDENTIAL_REQUIRED, "user_deepseek_key needs a credentialId")
        if credential_get_for_user(user=user, credential_id=credential_id) is None:
            raise DomainError(ErrorCode.CREDENTIAL_NOT_FOUND, f"Credential {credential_id} not found")
    else:
        credential_id = None
    try:
        # 7. the user's day: job count and token budget for this key mode
        day = quota_state.day
        quotas.quota_check(ai_settings=ai_settings, api_key_mode=mode, day=day, usage=quota_state.usage[mode])
        # 8. the platform key: breaker and the platform's budgets
        breaker_state = _platform_admit() if mode == ApiKeyMode.PLATFORM_KEY else None
        with transaction.atomic():
            # 9. the snapshot of the learner's data (inside, so a refusal leaves none behind)
            snapshot = snapshot_create(
                user=user, target_type=target_type, target_id=target_id, timezone_name=ai_settings.timezone
            )
            # 10. the job and the day's count, together
            # Half-open admissions one at a time: under the breaker row's lock, counted again.
            if breaker_state == CircuitState.HALF_OPEN and quotas.breaker_admit(locked=True) == CircuitState.HALF_OPEN:
                quotas.half_open_admit(active_platform_jobs=selectors.active_platform_jobs())
            # (On the day a change of timezone moved the user to, should one commit meanwhile.)
            day = quotas.quota_reserve_job(ai_settings=ai_settings, api_key_mode=mode, day=day)
            job = job_create(
                user=user,
                job_type=job_type,
                target_type=target_type,
                target_id=target_id,
                api_key_mode=mode,
                credential_id=credential_id,
                idempotency_key=idempotency_key,
                priority=priority,
                params=params,
                snapshot=snapshot,
                quota_date=day,
            )
    except (IntegrityError, DomainError):
        # A concurrent identical request won the idempotency key (or took the last of
        # the day's jobs, or of the half-open breaker's, even between step 5 and step 7):
        # this one counted nothing and answers that request's job, as if it had come second.
        found = _existing(
            user=user, job_type=job_type, target_type=target_type, target_id=target_id, key=idempotency_key
        )
        if found is None:
            raise
        return SubmittedJob(job=found, created=False)
    # 11.
    job.user_public_id = public_id_of(user)
    return SubmittedJob(job=job, created=True)
