"""The operators' first screen (``/admin/ai_jobs/airuntimejob/dashboard/``): is it
healthy, how deep is the queue, which runtimes are alive, what the breaker is doing,
how much was spent today. It reads ``ops.selectors``, as ``/metrics`` does, and
redraws itself every few seconds (``?partial=1`` is the body alone); ``?wall=1``
drops the admin's chrome for a wall screen. It needs the permission to view jobs."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from ai_jobs.models import AiRuntimeJob
from config.formatting import dollars, share
from ops import charts, selectors

REFRESH_SECONDS = 5
HOUR, DAY = dt.timedelta(hours=1), dt.timedelta(days=1)
OUTCOMES = (("succeeded", "s-ok"), ("failed", "s-bad"), ("cancelled", "s-muted"))


def ago(moment: dt.datetime | None, now: dt.datetime) -> str:
    """``4s``, ``3m 05s``, ``2h 10m``, ``3d 4h`` (``—`` for never)."""
    if moment is None:
        return "—"
    return duration(max(0.0, (now - moment).total_seconds()))


def duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s" if seconds % 60 else f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d {seconds % 86400 // 3600}h"


def _minute(moment: dt.datetime) -> dt.datetime:
    return moment.replace(second=0, microsecond=0)


def throughput(now: dt.datetime) -> dict[str, Any]:
    """Jobs finished per minute by outcome: the last hour by minute (60 bars), the
    last day by ten minutes (144 bars, averaged per minute). One query for both."""
    per_minute: dict[dt.datetime, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for minute, status, n in selectors.finished_per_minute(now=now, span=DAY + dt.timedelta(minutes=10)):
        per_minute[_minute(minute)][status] += n

    hour_buckets = [_minute(now) - dt.timedelta(minutes=59 - i) for i in range(60)]
    hour = charts.stacked_bars(
        ident="throughput-hour",
        buckets=hour_buckets,
        series=[charts.Series(name, css, [per_minute[m][name] for m in hour_buckets]) for name, css in OUTCOMES],
        label_every=10,
    )
    ten = _minute(now).replace(minute=_minute(now).minute // 10 * 10)
    day_buckets = [ten - dt.timedelta(minutes=10 * (143 - i)) for i in range(144)]

    def per_minute_in(start: dt.datetime, name: str) -> float:
        return sum(per_minute[start + dt.timedelta(minutes=k)][name] for k in range(10)) / 10

    day = charts.stacked_bars(
        ident="throughput-day",
        buckets=day_buckets,
        series=[charts.Series(name, css, [per_minute_in(b, name) for b in day_buckets]) for name, css in OUTCOMES],
        label_every=24,
        bucket_text="%H:%M (10 min)",
    )
    # The totals of what each chart shows, bucket for bucket.
    totals = {name: sum(per_minute[m][name] for m in hour_buckets) for name, _ in OUTCOMES}
    day_minutes = [b + dt.timedelta(minutes=k) for b in day_buckets for k in range(10)]
    day_totals = {name: sum(per_minute[m][name] for m in day_minutes) for name, _ in OUTCOMES}
    return {"hour": hour, "day": day, "hour_totals": totals, "day_totals": day_totals}


def queue_depth(now: dt.datetime) -> dict[str, Any]:
    """The sampled queue (one sample a minute, Celery beat) over the last hour."""
    samples = {
        _minute(m): (pending, in_flight) for m, pending, in_flight in selectors.queue_samples(now=now, span=HOUR)
    }
    buckets = [_minute(now) - dt.timedelta(minutes=59 - i) for i in range(60)]
    chart = charts.lines(
        ident="queue-depth",
        buckets=buckets,
        series=[
            charts.Series("pending", "s-pending", [samples[b][0] if b in samples else None for b in buckets]),
            charts.Series("in flight", "s-flight", [samples[b][1] if b in samples else None for b in buckets]),
        ],
        label_every=10,
    )
    return {"chart": chart, "samples": len(samples)}


def errors(now: dt.datetime) -> list[dict[str, Any]]:
    """Failed jobs of the last day by error code (a cancellation is no error)."""
    rows = [(code, n) for status, code, n in selectors.finished_with_error(now=now, span=DAY) if status == "failed"]
    top = max((n for _, n in rows), default=0)
    return [{"code": code, "n": n, "width": n / top * 100 if top else 0} for code, n in rows]


def dashboard_context(now: dt.datetime) -> dict[str, Any]:
    queue = selectors.queue(now=now)
    breaker = selectors.breaker()
    usage = selectors.platform_today()
    runtimes = selectors.runtimes(now=now, recent=dt.timedelta(minutes=10))
    tasks = selectors.asynch_tasks()
    try:
        slots = selectors.asynch_slots()
        slots_known = True
    except Exception:  # the semaphore's Redis is down: the rest of the screen still counts
        slots, slots_known = {}, False
    oldest = max(queue.oldest_due_seconds.values(), default=0.0)
    paused = selectors.paused_job_types()
    by_type = [
        {
            "job_type": job_type,
            "pending": queue.jobs[("pending", job_type)],
            "due": queue.pending_due[job_type],
            "locked": queue.jobs[("locked", job_type)],
            "running": queue.jobs[("running", job_type)],
            "oldest": duration(queue.oldest_due_seconds[job_type]) if queue.oldest_due_seconds[job_type] else "—",
            "paused": paused.get(job_type),
            "paused_since": ago(paused[job_type].paused_at, now) if job_type in paused else "",
        }
        for job_type in selectors.job_types()
    ]
    return {
        "now": now,
        "refresh_seconds": REFRESH_SECONDS,
        "tiles": {
            "pending": queue.total("pending"),
            "due": sum(queue.pending_due.values()),
            "backing_off": queue.total("pending") - sum(queue.pending_due.values()),
            "in_flight": queue.total("locked") + queue.total("running"),
            "locked": queue.total("locked"),
            "running": queue.total("running"),
            "oldest": duration(oldest) if oldest else "—",
            "oldest_warn": oldest > 300,
            "lapsed": queue.lapsed,
            "runtimes_active": sum(1 for r in runtimes if r.active),
            "active_window": duration(2 * settings.AI_JOB_LOCK_SECONDS),
        },
        "by_type": by_type,
        "paused": sorted(paused),
        "breaker": {
            "state": breaker.state,
            "label": breaker.state.replace("_", "-"),
            "reason": breaker.reason,
            "since": ago(breaker.changed_at, now),
            "changed_at": breaker.changed_at,
            "changed_by": breaker.changed_by,
            "failures": breaker.consecutive_failures,
        },
        "usage": {
            "day": usage.day,
            "zone": settings.PLATFORM_TIMEZONE,
            "tokens": f"{usage.tokens_used:,}",
            "token_budget": f"{usage.token_budget:,}",
            "token_share": share(usage.tokens_used, usage.token_budget),
            "cost": dollars(usage.cost_cents),
            "cost_budget": dollars(usage.cost_budget_cents),
            "cost_share": share(usage.cost_cents, usage.cost_budget_cents),
        },
        "runtimes": [
            {
                "instance_id": r.instance_id,
                "active": r.active,
                "held": r.held,
                "lapsed": r.lapsed,
                "heartbeat": ago(r.last_heartbeat_at, now),
                "seen": ago(r.last_seen_at, now),
            }
            for r in runtimes
        ],
        "throughput": throughput(now),
        "queue_depth": queue_depth(now),
        "errors": errors(now),
        "asynch": selectors.asynch_queue(tasks=tasks, slots=slots),
        "slots_known": slots_known,
    }


def dashboard_view(request: HttpRequest) -> HttpResponse:
    # The screen shows the queue first: whoever may view jobs may view it.
    if not admin.site.get_model_admin(AiRuntimeJob).has_view_or_change_permission(request):
        raise PermissionDenied
    context = dashboard_context(timezone.now())
    context["wall"] = bool(request.GET.get("wall"))
    if request.GET.get("partial"):
        return render(request, "admin/ops/dashboard_body.html", context)
    return render(
        request,
        "admin/ops/dashboard.html",
        {
            **admin.site.each_context(request),
            **context,
            "title": "Operations dashboard",
            "opts": AiRuntimeJob._meta,
        },
    )


view = admin.site.admin_view(dashboard_view)
