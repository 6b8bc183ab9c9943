"""Reads shared by views and services."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Min, Q, QuerySet

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


def queue_overview(*, now: dt.datetime) -> dict[str, object]:
    """What an operator watches: jobs by status and type, the queue's age, leases."""
    by_status_type = AiRuntimeJob.objects.values("status", "job_type").annotate(n=Count("id")).order_by()
    pending = AiRuntimeJob.objects.filter(status=JobStatus.PENDING).aggregate(
        due=Count("id", filter=Q(available_at__lte=now)),
        backing_off=Count("id", filter=Q(available_at__gt=now)),
        oldest=Min("created_at"),
    )
    leased = AiRuntimeJob.objects.filter(status__in=(JobStatus.LOCKED, JobStatus.RUNNING)).aggregate(
        total=Count("id"),
        lapsed=Count("id", filter=Q(lock_until__lt=now)),
        cancel_requested=Count("id", filter=Q(cancel_requested=True)),
    )
    last_hour = (
        AiRuntimeJob.objects.filter(finished_at__gte=now - dt.timedelta(hours=1))
        .values("status")
        .annotate(n=Count("id"))
        .order_by()
    )
    errors = (
        AiRuntimeJob.objects.filter(updated_at__gte=now - dt.timedelta(hours=24), error_code__isnull=False)
        .values("error_code")
        .annotate(n=Count("id"))
        .order_by("-n")[:10]
    )
    return {
        "by_status_type": list(by_status_type),
        "pending_due": pending["due"],
        "pending_backing_off": pending["backing_off"],
        "oldest_pending_age": (now - pending["oldest"]) if pending["oldest"] else None,
        "leased": leased["total"],
        "lapsed_leases": leased["lapsed"],
        "cancel_requested": leased["cancel_requested"],
        "finished_last_hour": {row["status"]: row["n"] for row in last_hour},
        "errors_last_day": list(errors),
    }
