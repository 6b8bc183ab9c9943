"""``GET /metrics``: Prometheus text of the gauges, read at scrape time
from ``ops.selectors``, and of the counters and histograms every process records
(``config.observability.metrics``). A source that cannot be read leaves its
metrics out and says so in ``aijobs_metrics_source_up``, instead of failing the scrape."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from config.observability import metrics
from config.observability.logging import Throttled
from ops import selectors

logger = logging.getLogger(__name__)
_warn = Throttled(logger)


def _gauge(name: str, help_text: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, labels=labels)


@dataclass
class _Read:
    """One scrape: its moment, and the model names the gauges met (their counters get 0s)."""

    now: Any
    models: set[str] = field(default_factory=set)


def _queue_families(read: _Read) -> Iterator[GaugeMetricFamily]:
    queue = selectors.queue(now=read.now)
    jobs = _gauge("aijobs_queue_jobs", "Jobs in each non-final state now", ["status", "job_type"])
    for (status, job_type), n in sorted(queue.jobs.items()):
        jobs.add_metric([status, job_type], n)
    due = _gauge("aijobs_queue_pending_due_jobs", "Pending jobs whose time has come (not backing off)", ["job_type"])
    oldest = _gauge("aijobs_queue_oldest_pending_seconds", "Age of the oldest due pending job", ["job_type"])
    for job_type in selectors.job_types():
        due.add_metric([job_type], queue.pending_due[job_type])
        oldest.add_metric([job_type], round(queue.oldest_due_seconds[job_type], 3))
    lapsed = _gauge("aijobs_leases_lapsed", "Locked or running jobs whose lease lapsed, not yet reaped")
    lapsed.add_metric([], queue.lapsed)
    lock = _gauge("aijobs_job_lock_seconds", "AI_JOB_LOCK_SECONDS: a lease's length")
    lock.add_metric([], settings.AI_JOB_LOCK_SECONDS)
    yield from (jobs, due, oldest, lapsed, lock)


def _pause_families(read: _Read) -> Iterator[GaugeMetricFamily]:
    paused = selectors.paused_job_types()
    family = _gauge("aijobs_job_type_paused", "1 while an operator has paused the job type", ["job_type"])
    for job_type in selectors.job_types():
        family.add_metric([job_type], 1 if job_type in paused else 0)
    yield family


def _runtime_families(read: _Read) -> Iterator[GaugeMetricFamily]:
    active = _gauge(
        "aijobs_runtimes_active", "Runtime instances holding a live lease or seen in the last 2 x AI_JOB_LOCK_SECONDS"
    )
    active.add_metric([], sum(1 for runtime in selectors.runtimes(now=read.now) if runtime.active))
    yield active


def _breaker_families(read: _Read) -> Iterator[GaugeMetricFamily]:
    state = selectors.breaker().state
    breaker = _gauge("aijobs_breaker_state", "1 for the platform circuit breaker's current state", ["state"])
    for name in selectors.BREAKER_STATES:
        breaker.add_metric([name], 1 if name == state else 0)
    yield breaker
    usage = selectors.platform_today()
    for name, help_text, value in (
        (
            "aijobs_platform_tokens_today",
            "Platform-key tokens on today's platform day (PLATFORM_TIMEZONE)",
            usage.tokens_used,
        ),
        ("aijobs_platform_cost_cents_today", "Platform-key cost in cents on today's platform day", usage.cost_cents),
        ("aijobs_platform_token_budget", "PLATFORM_DAILY_TOKEN_BUDGET", usage.token_budget),
        ("aijobs_platform_cost_budget_cents", "PLATFORM_DAILY_COST_BUDGET_CENTS", usage.cost_budget_cents),
    ):
        gauge = _gauge(name, help_text)
        gauge.add_metric([], float(value))
        yield gauge


def _asynch_families(read: _Read) -> Iterator[GaugeMetricFamily]:
    tasks = selectors.asynch_tasks()
    queues = selectors.asynch_queue(tasks=tasks, slots={})  # every configured model, and those with tasks
    read.models.update(q.model_name for q in queues)
    family = _gauge("asynch_tasks", "model-asynch tasks by state", ["state", "model_name"])
    limit = _gauge("asynch_model_queue_limit", "A model's queueLimit: queued tasks it accepts (0: no limit)",
                   ["model_name"])  # fmt: skip
    for model in queues:
        for state in selectors.ASYNCH_STATES:
            family.add_metric([str(state), model.model_name], tasks.get((state, model.model_name), 0))
        if model.queue_limit is not None:
            limit.add_metric([model.model_name], model.queue_limit)
    yield from (family, limit)


def _semaphore_families(read: _Read) -> Iterator[GaugeMetricFamily]:
    family = _gauge("asynch_semaphore_in_use", "model-asynch semaphore slots held now, all tenants", ["model_name"])
    slots = selectors.asynch_slots()
    for model in selectors.asynch_queue(tasks={}, slots=slots):  # every configured model, 0 when idle
        family.add_metric([model.model_name], model.slots_in_use)
    yield family


# (source, what it reads): a source that fails is reported down and its families left out.
_GAUGES: list[tuple[str, Callable[[_Read], Iterator[GaugeMetricFamily]]]] = [
    ("database", _queue_families),
    ("database", _pause_families),
    ("database", _runtime_families),
    ("database", _breaker_families),
    ("database", _asynch_families),
    ("semaphore", _semaphore_families),
]


def _seeds(models: set[str]) -> dict[metrics.Metric, list[tuple[str, ...]]]:
    """The counters' label sets known in advance (``metrics.with_zeros``). A finished job
    is seeded with no error code, but a cancelled one with the only code it ever has."""
    types = selectors.job_types()
    code = {"cancelled": "JOB_CANCELLED"}
    return {
        metrics.JOBS_FINISHED: [(s, t, code.get(s, "")) for s in selectors.FINAL_STATUSES for t in types],
        metrics.MODEL_TOKENS: [(mode,) for mode in selectors.API_KEY_MODES],
        metrics.HTTP_REQUESTS: [(api, s) for api in metrics.HTTP_APIS for s in metrics.HTTP_SEEDED_STATUSES],
        metrics.HTTP_DURATION: [(api,) for api in metrics.HTTP_APIS],
        metrics.PUSHES: [
            (platform, outcome) for platform in metrics.PUSH_PLATFORMS for outcome in metrics.PUSH_OUTCOMES
        ],
        metrics.ASYNCH_CALLS: [(name, outcome) for name in sorted(models) for outcome in metrics.ASYNCH_OUTCOMES],
        metrics.WEBHOOK_DELIVERIES: [(outcome,) for outcome in metrics.WEBHOOK_OUTCOMES],
    }


class Collector:
    def collect(self) -> Iterator[Any]:
        read = _Read(now=timezone.now())
        up: dict[str, int] = {}
        for source, gauges in _GAUGES:
            try:
                families = list(gauges(read))
            except Exception as error:
                up[source] = 0
                _warn.warning(
                    f"gauge:{gauges.__name__}", "metrics: %s not read (%s: %s)", source, type(error).__name__, error
                )
                continue
            up.setdefault(source, 1)
            yield from families
        try:
            recorded = metrics.with_zeros(metrics.store().collect(), _seeds(read.models))
            up["counters"] = 1
        except Exception as error:
            recorded = []
            up["counters"] = 0
            _warn.warning("counters", "metrics: counters not read (%s: %s)", type(error).__name__, error)
        yield from recorded
        family = _gauge("aijobs_metrics_source_up", "1 when /metrics could read the source", ["source"])
        for source, value in sorted(up.items()):
            family.add_metric([source], value)
        yield family


def render() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return generate_latest(registry)
