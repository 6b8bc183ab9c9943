"""Reads shared by views and services."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Case, Count, Exists, F, Max, Model, OuterRef, Q, QuerySet, Subquery, Sum, Value, When
from django.db.models.functions import TruncMinute
from django.utils.text import smart_split, unescape_string_literal

from accounts.selectors import public_id_subquery, resolve_me
from ai_jobs import pauses
from ai_jobs.models import (
    ACTIVE_STATUSES,
    FINAL_STATUSES,
    AiInvocationLog,
    AiRuntimeJob,
    ApiKeyMode,
    JobStatus,
    QueueSample,
    RuntimeInstance,
)
from config.errors import DomainError, ErrorCode
from quotas import selectors as quota_selectors
from quotas.models import CircuitState, PlatformCircuitBreaker

POLL_MAX = 50


def with_public_ids(jobs: QuerySet[AiRuntimeJob]) -> QuerySet[AiRuntimeJob]:
    """Jobs that carry their user's public id (``userId`` on the wire), read in the
    same statement: never a query per job."""
    return jobs.annotate(user_public_id=public_id_subquery())


def pending_jobs(*, job_types: Sequence[str], limit: int, now: dt.datetime) -> list[AiRuntimeJob]:
    """Due pending jobs of the given types in queue order, served by
    the partial index on pending rows; platform-key ones only while the breaker is
    closed, and while it is half-open as many as may still start."""
    limit, job_types = min(limit, POLL_MAX), pauses.unpaused(job_types)  # a paused type's jobs wait
    due = with_public_ids(
        AiRuntimeJob.objects.filter(status=JobStatus.PENDING, available_at__lte=now, job_type__in=job_types)
    ).order_by("priority", "created_at", "id")
    platform = Q(api_key_mode=ApiKeyMode.PLATFORM_KEY)
    breaker = PlatformCircuitBreaker.objects.filter(id=1).exclude(state=CircuitState.CLOSED)
    jobs = list(due.filter(~platform | ~Exists(breaker))[:limit])
    if len(jobs) < limit and quota_selectors.breaker_state_hint() == CircuitState.HALF_OPEN:
        free = settings.PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS - leased_platform_jobs()
        if free > 0:
            trial = due.filter(platform, Exists(breaker.filter(state=CircuitState.HALF_OPEN)))
            jobs += list(trial[: min(free, limit - len(jobs))])
            jobs.sort(key=lambda job: (job.priority, job.created_at, job.id))
    return jobs


# --- what a job cost ----------------------------------------------------------------------------------

_USAGE_COLUMNS = ("prompt_tokens", "completion_tokens", "total_tokens", "cost_cents")


@dataclass(frozen=True)
class JobUsage:
    """Every model call of a job, every attempt: the accepted result's call and each
    invocation log that carries an ``errorCode`` (a log without one is the accepted call,
    counted once through the result)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_cents: Decimal = Decimal(0)
    calls: int = 0


def _failed_calls(value: Any) -> Subquery:
    calls = AiInvocationLog.objects.filter(job_id=OuterRef("pk"), error_code__isnull=False).order_by().values("job_id")
    return Subquery(calls.annotate(value=value).values("value"))


def with_usage(jobs: QuerySet[AiRuntimeJob]) -> QuerySet[AiRuntimeJob]:
    """Jobs that carry what they cost (``job_usage``), read in the same statement: the
    result's columns by its join, the failed calls' sums by a subquery each, never a
    query per job."""
    return jobs.annotate(
        usage_result_id=F("result__id"),
        **{f"usage_result_{column}": F(f"result__{column}") for column in _USAGE_COLUMNS},
        **{f"usage_logs_{column}": _failed_calls(Sum(column)) for column in _USAGE_COLUMNS},
        usage_logs_calls=_failed_calls(Count("*")),
    )


def job_usage(job: AiRuntimeJob) -> JobUsage:
    """What ``job`` cost, from ``with_usage``'s columns; a job read without them is read
    again with them, unless it never began an attempt (no call yet)."""
    values = job.__dict__
    if "usage_logs_calls" not in values:
        if not job.attempt_no:
            return JobUsage()
        values = with_usage(AiRuntimeJob.objects.filter(pk=job.pk)).values(*_USAGE_FIELDS).first() or {}

    def total(column: str) -> Any:
        return (values.get(f"usage_result_{column}") or 0) + (values.get(f"usage_logs_{column}") or 0)

    return JobUsage(
        prompt_tokens=total("prompt_tokens"),
        completion_tokens=total("completion_tokens"),
        total_tokens=total("total_tokens"),
        cost_cents=Decimal(total("cost_cents")),
        calls=(1 if values.get("usage_result_id") else 0) + (values.get("usage_logs_calls") or 0),
    )


_USAGE_FIELDS = (
    "usage_result_id",
    "usage_logs_calls",
    *(f"usage_{side}_{column}" for side in ("result", "logs") for column in _USAGE_COLUMNS),
)


def user_jobs(
    *, user: AbstractBaseUser, status: str | None = None, job_type: str | None = None
) -> QuerySet[AiRuntimeJob]:
    jobs = with_usage(with_public_ids(AiRuntimeJob.objects.filter(user=user)))
    if status:
        jobs = jobs.filter(status=status)
    if job_type:
        jobs = jobs.filter(job_type=job_type)
    return jobs


def user_job(*, user: AbstractBaseUser, job_id: str) -> AiRuntimeJob:
    """The user's job; another user's answers exactly as a missing one."""
    job = with_usage(with_public_ids(AiRuntimeJob.objects.filter(user=user, id=job_id))).first()
    if job is None:
        raise DomainError(ErrorCode.JOB_NOT_FOUND, f"Job {job_id} not found")
    return job


def job_linked(
    *,
    model: type[Model],
    user: AbstractBaseUser,
    target_type: str | None = None,
    target_id: str | None = None,
    job_id: str | None = None,
) -> QuerySet[Any]:
    """The user's rows of a model linked to jobs (``JobLinked``: outputs, notices),
    optionally of one target type, target or job; a published question or card is
    listed under the job that published it. (Newest first is the paginator's order.)"""
    rows = model._default_manager.filter(user=user)
    if target_type is not None:
        rows = rows.filter(target_type=target_type)
    if target_id is not None:
        rows = rows.filter(target_id=resolve_me(user, target_id))
    if job_id is not None:
        rows = rows.filter(job_id=job_id)
    return rows


def open_job_ids(*, user: AbstractBaseUser) -> list[str]:
    """The user's jobs that have not finished: pending, locked or running."""
    return list(
        AiRuntimeJob.objects.filter(user=user, status__in=(JobStatus.PENDING, *ACTIVE_STATUSES)).values_list(
            "id", flat=True
        )
    )


def leased_platform_jobs() -> int:
    """Platform-key jobs locked or running: what a half-open breaker lets run at once."""
    return AiRuntimeJob.objects.filter(api_key_mode=ApiKeyMode.PLATFORM_KEY, status__in=ACTIVE_STATUSES).count()


def active_platform_jobs() -> int:
    """Platform-key jobs pending, locked or running: what a half-open breaker admits against."""
    return AiRuntimeJob.objects.filter(
        api_key_mode=ApiKeyMode.PLATFORM_KEY, status__in=(JobStatus.PENDING, *ACTIVE_STATUSES)
    ).count()


# --- what operators watch: /metrics and the dashboard read these (through ops.selectors) ---------


def _count_where(condition: Q) -> Sum:
    """Rows matching ``condition``, naming only its columns (``COUNT(id) FILTER`` would
    need ``id`` and so the table, where an index-only scan is possible)."""
    return Sum(Case(When(condition, then=Value(1)), default=Value(0)))


@dataclass(frozen=True)
class QueueCounts:
    jobs: dict[tuple[str, str], int]  # (status, job_type) → jobs, for pending, locked, running
    pending_due: dict[str, int]  # job_type → pending jobs whose time has come
    lapsed: int  # locked/running jobs whose lease lapsed, not yet reaped

    def total(self, status: str) -> int:
        return sum(n for (s, _), n in self.jobs.items() if s == status)


def queue_counts(*, now: dt.datetime) -> QueueCounts:
    """Two indexed queries: pending rows from their partial index by type (index
    only), leased rows from theirs; neither reads finished history."""
    jobs: dict[tuple[str, str], int] = {}
    due: dict[str, int] = {}
    pending = (
        AiRuntimeJob.objects.filter(status=JobStatus.PENDING)
        .values("job_type")
        .annotate(n=Count("*"), due=_count_where(Q(available_at__lte=now)))
        .order_by()
    )
    for row in pending:
        jobs[(JobStatus.PENDING.value, row["job_type"])] = row["n"]
        due[row["job_type"]] = row["due"]
    leased = (
        AiRuntimeJob.objects.filter(status__in=ACTIVE_STATUSES)
        .values("status", "job_type")
        .annotate(n=Count("*"), lapsed=_count_where(Q(lock_until__lt=now)))
        .order_by()
    )
    lapsed = 0
    for row in leased:
        jobs[(row["status"], row["job_type"])] = row["n"]
        lapsed += row["lapsed"]
    return QueueCounts(jobs=jobs, pending_due=due, lapsed=lapsed)


def oldest_due_pending(*, now: dt.datetime, job_types: Sequence[str]) -> dict[str, dt.datetime]:
    """The creation time of the oldest due pending job of each type: one short index
    scan per type (``ai_job_pending_by_type`` in creation order), however deep the queue."""
    oldest = {}
    for job_type in job_types:
        found = (
            AiRuntimeJob.objects.filter(status=JobStatus.PENDING, job_type=job_type, available_at__lte=now)
            .order_by("created_at")
            .values_list("created_at", flat=True)
            .first()
        )
        if found is not None:
            oldest[job_type] = found
    return oldest


@dataclass(frozen=True)
class RuntimeLeases:
    instance_id: str
    held: int
    lapsed: int
    last_renewed_at: dt.datetime | None  # the latest lock or heartbeat of a held job


def runtime_leases(*, now: dt.datetime, lease: dt.timedelta) -> list[RuntimeLeases]:
    """Each instance holding locked/running jobs, from the leased rows' index."""
    rows = (
        AiRuntimeJob.objects.filter(status__in=ACTIVE_STATUSES)
        .values("locked_by")
        .annotate(held=Count("*"), lapsed=_count_where(Q(lock_until__lt=now)), last=Max("lock_until"))
        .order_by()
    )
    return [
        RuntimeLeases(
            instance_id=row["locked_by"] or "",
            held=row["held"],
            lapsed=row["lapsed"],
            last_renewed_at=row["last"] - lease if row["last"] else None,
        )
        for row in rows
    ]


def runtime_instances_seen(*, since: dt.datetime) -> list[RuntimeInstance]:
    return list(RuntimeInstance.objects.filter(last_seen_at__gte=since).order_by("instance_id"))


def finished_per_minute(*, since: dt.datetime) -> list[tuple[dt.datetime, str, int]]:
    """(minute, final status, jobs) for jobs finished since then, from ``ai_job_finished``."""
    rows = (
        AiRuntimeJob.objects.filter(finished_at__gte=since, status__in=FINAL_STATUSES)
        .annotate(minute=TruncMinute("finished_at"))
        .values("minute", "status")
        .annotate(n=Count("*"))
        .order_by()
    )
    return [(row["minute"], row["status"], row["n"]) for row in rows]


def finished_with_error(*, since: dt.datetime) -> list[tuple[str, str, int]]:
    """(status, error code, jobs) of jobs that ended failed or cancelled since then."""
    rows = (
        AiRuntimeJob.objects.filter(
            finished_at__gte=since, status__in=(JobStatus.FAILED, JobStatus.CANCELLED), error_code__isnull=False
        )
        .values("status", "error_code")
        .annotate(n=Count("*"))
        .order_by("-n", "error_code")
    )
    return [(row["status"], row["error_code"], row["n"]) for row in rows]


def queue_samples(*, since: dt.datetime) -> list[QueueSample]:
    return list(QueueSample.objects.filter(minute__gte=since).order_by("minute"))


# --- jobs by an operator's filter (the admin's job list, bulk operations, commands) -------------------

# What the job list's search box looks in; a bulk operation searches the same way.
JOB_SEARCH_FIELDS = ("id", "user__username", "target_id", "locked_by", "error_code")
# A bulk operation's filter: each key and what it matches.
JOB_FILTER_KEYS = {
    "status": "status",
    "job_type": "job_type",
    "error_code": "error_code",
    "api_key_mode": "api_key_mode",
    "target_type": "target_type",
    "cancel_requested": "cancelRequested (true or false)",
    "user": "a username or a user's public id (usr_...)",
    "since": "created at or after (ISO 8601)",
    "until": "created before (ISO 8601)",
    "search": "the job list's search: words each found in the id, username, target, runtime or error code",
}


def jobs_matching(job_filter: dict[str, str]) -> QuerySet[AiRuntimeJob]:
    """The jobs matching a filter of ``JOB_FILTER_KEYS`` (its values checked already:
    ``ai_jobs.services.bulk.job_filter_clean``), as the admin's job list would show them."""
    jobs = AiRuntimeJob.objects.all()
    for key in ("status", "job_type", "error_code", "api_key_mode", "target_type"):
        if key in job_filter:
            jobs = jobs.filter(**{key: job_filter[key]})
    if "cancel_requested" in job_filter:
        jobs = jobs.filter(cancel_requested=job_filter["cancel_requested"] == "true")
    if "user" in job_filter:
        who = job_filter["user"]
        jobs = jobs.filter(Q(user__username=who) | Q(user__account__public_id=who))
    if "since" in job_filter:
        jobs = jobs.filter(created_at__gte=dt.datetime.fromisoformat(job_filter["since"]))
    if "until" in job_filter:
        jobs = jobs.filter(created_at__lt=dt.datetime.fromisoformat(job_filter["until"]))
    for word in smart_split(job_filter.get("search", "")):
        if word.startswith(('"', "'")) and word[0] == word[-1]:
            word = unescape_string_literal(word)
        jobs = jobs.filter(Q(*((f"{field}__icontains", word) for field in JOB_SEARCH_FIELDS), _connector=Q.OR))
    return jobs
