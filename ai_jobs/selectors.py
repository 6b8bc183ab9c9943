"""Reads shared by views and services."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from ai_jobs.models import AiRuntimeJob, JobStatus
from config.errors import DomainError, ErrorCode

POLL_MAX = 50


def pending_jobs(*, job_types: Sequence[str], limit: int, now: dt.datetime) -> list[AiRuntimeJob]:
    """Due pending jobs of the given types in queue order (seed 000 §10), served by
    the partial index on pending rows."""
    return list(
        AiRuntimeJob.objects.filter(status=JobStatus.PENDING, available_at__lte=now, job_type__in=job_types).order_by(
            "priority", "created_at", "id"
        )[: min(limit, POLL_MAX)]
    )


def user_jobs(
    *, user: AbstractBaseUser, status: str | None = None, job_type: str | None = None
) -> QuerySet[AiRuntimeJob]:
    jobs = AiRuntimeJob.objects.filter(user=user)
    if status:
        jobs = jobs.filter(status=status)
    if job_type:
        jobs = jobs.filter(job_type=job_type)
    return jobs


def user_job(*, user: AbstractBaseUser, job_id: str) -> AiRuntimeJob:
    """The user's job; another user's answers exactly as a missing one."""
    job = AiRuntimeJob.objects.filter(user=user, id=job_id).first()
    if job is None:
        raise DomainError(ErrorCode.JOB_NOT_FOUND, f"Job {job_id} not found")
    return job
