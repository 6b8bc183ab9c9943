"""What operators watch, read once for both screens: ``GET /metrics`` (``ops.metrics``)
and the admin dashboard (``ops.dashboard``) call these and nothing else, so the two
never disagree. Each read is a short indexed query (bench/bench_metrics.py)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings

from ai_jobs import job_types as registry
from ai_jobs import selectors as jobs
from ai_jobs.models import JobStatus, JobTypePause
from asynch import selectors as asynch
from asynch.models import AsynchModel
from quotas import selectors as quotas
from quotas.models import ApiKeyMode, CircuitState

QUEUE_STATUSES = (JobStatus.PENDING.value, JobStatus.LOCKED.value, JobStatus.RUNNING.value)
FINAL_STATUSES = (JobStatus.SUCCEEDED.value, JobStatus.FAILED.value, JobStatus.CANCELLED.value)
API_KEY_MODES = tuple(ApiKeyMode.values)
ASYNCH_STATES = asynch.OPEN_STATES


@dataclass(frozen=True)
class Queue:
    jobs: dict[tuple[str, str], int]  # (status, job_type) → jobs, every pair present
    pending_due: dict[str, int]
    oldest_due_seconds: dict[str, float]  # job_type → age of its oldest due pending job, 0 when none
    lapsed: int

    def total(self, status: str) -> int:
        return sum(n for (s, _), n in self.jobs.items() if s == status)


def job_types() -> list[str]:
    return registry.names()


def paused_job_types() -> dict[str, JobTypePause]:
    """The paused job types as the database has them now (not a process's copy)."""
    return {pause.job_type: pause for pause in JobTypePause.objects.order_by("job_type")}


def queue(*, now: dt.datetime) -> Queue:
    counts = jobs.queue_counts(now=now)
    types = job_types()
    oldest = jobs.oldest_due_pending(now=now, job_types=types)
    return Queue(
        jobs={(status, t): counts.jobs.get((status, t), 0) for status in QUEUE_STATUSES for t in types},
        pending_due={t: counts.pending_due.get(t, 0) for t in types},
        oldest_due_seconds={t: max(0.0, (now - oldest[t]).total_seconds()) if t in oldest else 0.0 for t in types},
        lapsed=counts.lapsed,
    )


@dataclass(frozen=True)
class Runtime:
    instance_id: str
    held: int
    lapsed: int
    last_heartbeat_at: dt.datetime | None
    last_seen_at: dt.datetime | None
    active: bool  # holds a live lease, or called in the last 2 x AI_JOB_LOCK_SECONDS


def runtimes(*, now: dt.datetime, recent: dt.timedelta | None = None) -> list[Runtime]:
    """Instances holding leases, and those seen in the ``recent`` window (default:
    the activity window, 2 x the lease), the active ones first."""
    lease = dt.timedelta(seconds=settings.AI_JOB_LOCK_SECONDS)
    window = 2 * lease
    leases = {row.instance_id: row for row in jobs.runtime_leases(now=now, lease=lease)}
    seen = {row.instance_id: row for row in jobs.runtime_instances_seen(since=now - max(window, recent or window))}
    found = []
    for instance_id in sorted(set(leases) | set(seen)):
        held, instance = leases.get(instance_id), seen.get(instance_id)
        heartbeats = [
            moment
            for moment in (held.last_renewed_at if held else None, instance.last_heartbeat_at if instance else None)
            if moment
        ]
        live_lease = held is not None and held.held > held.lapsed
        found.append(
            Runtime(
                instance_id=instance_id,
                held=held.held if held else 0,
                lapsed=held.lapsed if held else 0,
                last_heartbeat_at=max(heartbeats) if heartbeats else None,
                last_seen_at=instance.last_seen_at if instance else None,
                active=live_lease or (instance is not None and instance.last_seen_at >= now - window),
            )
        )
    found.sort(key=lambda r: (not r.active, r.instance_id))
    return found


@dataclass(frozen=True)
class Breaker:
    state: str
    reason: str
    changed_at: dt.datetime
    changed_by: str
    consecutive_failures: int


def breaker() -> Breaker:
    row = quotas.breaker_get()
    return Breaker(
        state=row.state,
        reason=row.reason,
        changed_at=row.changed_at,
        changed_by=row.changed_by,
        consecutive_failures=row.consecutive_failures,
    )


BREAKER_STATES = tuple(CircuitState.values)


def platform_today() -> quotas.PlatformUsage:
    return quotas.platform_usage_today()


@dataclass(frozen=True)
class AsynchModelQueue:
    model_name: str
    by_state: dict[int, int]  # 0-3 → tasks
    slots_in_use: int
    max_concurrency: int | None  # None: a model with tasks but no config (deleted)
    enabled: bool
    queue_limit: int | None  # 0: no limit; None: no config


def asynch_tasks() -> dict[tuple[int, str], int]:
    return asynch.tasks_by_state_and_model()


def asynch_slots() -> dict[str, int]:
    return asynch.semaphore_in_use()


def asynch_queue(*, tasks: dict[tuple[int, str], int], slots: dict[str, int]) -> list[AsynchModelQueue]:
    """Every configured model, and any other model that still has tasks."""
    configs = {
        m.model_name: m for m in AsynchModel.objects.only("model_name", "max_concurrency", "enabled", "queue_limit")
    }
    names = sorted(set(configs) | {name for _, name in tasks} | set(slots))
    return [
        AsynchModelQueue(
            model_name=name,
            by_state={state: tasks.get((state, name), 0) for state in ASYNCH_STATES},
            slots_in_use=slots.get(name, 0),
            max_concurrency=configs[name].max_concurrency if name in configs else None,
            enabled=configs[name].enabled if name in configs else False,
            queue_limit=configs[name].queue_limit if name in configs else None,
        )
        for name in names
    ]


# --- the dashboard's history (from the job rows and the queue samples) ------------------------------


def finished_per_minute(*, now: dt.datetime, span: dt.timedelta) -> list[tuple[dt.datetime, str, int]]:
    return jobs.finished_per_minute(since=now - span)


def finished_with_error(*, now: dt.datetime, span: dt.timedelta) -> list[tuple[str, str, int]]:
    return jobs.finished_with_error(since=now - span)


def queue_samples(*, now: dt.datetime, span: dt.timedelta) -> list[tuple[dt.datetime, int, int]]:
    """(minute, pending, locked + running) for each sampled minute of the span."""
    return [(s.minute, s.pending, s.locked + s.running) for s in jobs.queue_samples(since=now - span)]
