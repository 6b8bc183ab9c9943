"""Taking and keeping a job's lease: lock one job, claim the due ones (with
``include``: handed out at once), heartbeat. Status changes go through
``ai_jobs.transitions`` and nowhere else."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from ai_jobs import leases, pauses, selectors, transitions
from ai_jobs.models import (
    ACTIVE_STATUSES,
    AiRuntimeJob,
    ApiKeyMode,
    JobStatus,
)
from ai_jobs.services.finish import job_fail
from ai_jobs.services.handout import (
    ResolvedCredential,
    cancel_for_withdrawn_consent,
    refusal,
    resolve_credential,
    snapshot_text,
)
from config.errors import DomainError, ErrorCode, RuntimeErrorCode
from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas import throttles as quota_throttles
from quotas.models import CircuitState

logger = logging.getLogger(__name__)


def lease_length() -> dt.timedelta:
    return dt.timedelta(seconds=settings.AI_JOB_LOCK_SECONDS)


def job_lock(*, job_id: str, instance_id: str) -> AiRuntimeJob:
    now = timezone.now()
    if pauses.paused_types():  # only while a type is paused does a lock read the job's type first
        _refuse_if_paused(job_id)
    job = transitions.lock(job_id=job_id, instance_id=instance_id, now=now, lease=lease_length())
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
                transitions.lock(job_id=job_id, instance_id=instance_id, now=now, lease=lease_length(), trial=True)
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


def _refuse_if_paused(job_id: str) -> None:
    job = AiRuntimeJob.objects.filter(id=job_id).values_list("status", "job_type").first()
    if job is not None and job[0] == JobStatus.PENDING and job[1] in pauses.paused_types():
        raise DomainError(
            ErrorCode.JOB_NOT_ACTIVE,
            f"Job {job_id} waits in pending: its job type {job[1]} is paused by an operator",
        )


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


# How long a claimId is remembered, in leases: past its lease a claim's jobs are no longer
# its own to answer, and a claim sent later is only ever answered with nothing.
CLAIM_ID_REMEMBERED_LEASES = 10
# How long after the first claim a claim sent again waits for the first's jobs, should the
# first still be taking them (its runtime gave up waiting for a slow answer).
CLAIM_SETTLE_SECONDS = 2.0


def _claim_key(instance_id: str, claim_id: str) -> str:
    digest = hashlib.sha256(f"{instance_id}\n{claim_id}".encode()).hexdigest()[:40]
    return f"ai-claim:{digest}"


def _claim_first_made(instance_id: str, claim_id: str) -> float | None:
    """When this instance first sent ``claim_id`` (epoch seconds), or None when this is
    the first time: one atomic add in the cache every web process shares (Redis), nothing
    on the database, so a claim costs one round trip to the cache more. Without Redis (the
    embedded default, whose cache is each process's memory) one statement on the table the
    throttles count in instead. A cache that cannot be reached remembers nothing: the
    claim is then an ordinary one."""
    key = _claim_key(instance_id, claim_id)
    ttl = CLAIM_ID_REMEMBERED_LEASES * settings.AI_JOB_LOCK_SECONDS
    if not settings.REDIS_URL:
        return quota_throttles.first_seen_in_database(key, ttl)
    try:
        if cache.add(key, time.time(), timeout=ttl):
            return None
        first = cache.get(key)
    except Exception as error:  # a cache outage must not stop claims (see the docstring)
        logger.warning("a claimId is not remembered: the cache cannot be reached (%s)", type(error).__name__)
        return None
    return float(first) if isinstance(first, int | float) else None  # gone meanwhile: a claim of its own


def _claim_forget(instance_id: str, claim_id: str) -> None:
    """A claim that raised took nothing: the same claimId again is a claim of its own."""
    with contextlib.suppress(Exception):
        if settings.REDIS_URL:
            cache.delete(_claim_key(instance_id, claim_id))
        else:
            quota_throttles.forget_in_database(_claim_key(instance_id, claim_id))


def _claimed_again(*, instance_id: str, claim_id: str, first_made: float) -> list[AiRuntimeJob]:
    """The first claim's jobs; none yet while it may still be taking them: asked again
    until ``CLAIM_SETTLE_SECONDS`` after it (a claim that found nothing is answered
    nothing then)."""
    # Bounded by this process's clock too: another web host's may be off.
    until = time.monotonic() + max(0.0, min(CLAIM_SETTLE_SECONDS, first_made + CLAIM_SETTLE_SECONDS - time.time()))
    while True:
        jobs = transitions.claimed_again(claim_id=claim_id, instance_id=instance_id, now=timezone.now())
        if jobs or time.monotonic() >= until:
            return jobs
        time.sleep(0.1)


def job_claim(
    *, job_types: Sequence[str], limit: int, instance_id: str, start: bool = False, claim_id: str | None = None
) -> list[AiRuntimeJob]:
    """One statement, atomic on its own: picking and locking happen together. While
    the breaker is half-open, a second step adds trial platform-key jobs. ``start``:
    the jobs go straight to ``running`` (the fast path, ``job_claim_started``).

    ``claim_id`` (contract §3, "a lost answer costs nothing"): sent again by the same
    instance, the claim answers the jobs it took that this instance still holds,
    untouched since, with their current leases, and locks nothing more."""
    if claim_id is None:
        return _claim(job_types=job_types, limit=limit, instance_id=instance_id, start=start, claim_id=None)
    first_made = _claim_first_made(instance_id, claim_id)
    if first_made is not None:
        return _claimed_again(instance_id=instance_id, claim_id=claim_id, first_made=first_made)
    try:
        return _claim(job_types=job_types, limit=limit, instance_id=instance_id, start=start, claim_id=claim_id)
    except BaseException:
        _claim_forget(instance_id, claim_id)
        raise


def _claim(
    *, job_types: Sequence[str], limit: int, instance_id: str, start: bool, claim_id: str | None
) -> list[AiRuntimeJob]:
    limit, now = min(limit, selectors.POLL_MAX), timezone.now()
    job_types = pauses.unpaused(job_types)  # a paused type's jobs wait
    jobs = transitions.claim(
        job_types=job_types,
        limit=limit,
        instance_id=instance_id,
        now=now,
        lease=lease_length(),
        start=start,
        claim_id=claim_id,
    )
    if len(jobs) < limit and job_types and quota_selectors.breaker_state_hint() == CircuitState.HALF_OPEN:
        jobs += _trial(
            lambda free: transitions.claim(
                job_types=job_types,
                limit=min(free, limit - len(jobs)),
                instance_id=instance_id,
                now=now,
                lease=lease_length(),
                trial=True,
                start=start,
                claim_id=claim_id,
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
    *,
    job_types: Sequence[str],
    limit: int,
    instance_id: str,
    snapshot: bool,
    credential: bool,
    claim_id: str | None = None,
) -> list[StartedJob]:
    """Claim with ``include``: the claim, then one read of every claimed
    job's consent, snapshot text and credential columns. Each job gets what the
    separate calls would give, under the same rules: a job whose consent was withdrawn
    ends ``cancelled`` (the snapshot call's ``JOB_NOT_ACTIVE``, after which a runtime
    drops it); a credential that cannot be resolved fails the job with
    ``CREDENTIAL_RESOLVE_FAILED``, as the reference runtime reports it. Neither is in
    the answer. The same ``claim_id`` again hands its untouched jobs out again: its
    answer, with all they carried, was lost."""
    jobs = job_claim(job_types=job_types, limit=limit, instance_id=instance_id, start=True, claim_id=claim_id)
    now = timezone.now()
    rows = leases.claimed_jobs(
        job_ids=[job.id for job in jobs], instance_id=instance_id, now=now, snapshot=snapshot, credential=credential
    )
    started = []
    for job in jobs:
        row = rows.get(job.id)
        if row is None:  # gone since the claim (a user deleted meanwhile)
            continue
        if not row.consents:
            cancel_for_withdrawn_consent(job.id, instance_id)
            continue
        resolved = None
        if credential:
            try:
                resolved = resolve_credential(row)
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
                text = snapshot_text(row, now)
            except DomainError:
                # Handed out without it: the runtime asks GET .../snapshot, whose answer says
                # why, and the other jobs of the claim are not lost with this one's error.
                logger.warning("job %s claimed without its snapshot: it could not be built", job.id)
        started.append(StartedJob(job=job, snapshot=text, credential=resolved))
    return started


def job_heartbeat(*, job_id: str, instance_id: str) -> transitions.Heartbeat:
    beat = transitions.heartbeat(job_id=job_id, instance_id=instance_id, now=timezone.now(), lease=lease_length())
    if beat is None:
        raise refusal(job_id, instance_id)
    return beat
