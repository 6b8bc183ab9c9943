"""The counters and histograms ``GET /metrics`` exports, recorded by whichever process sees
the event (a gunicorn worker, a Celery worker, a management command) and read back
by ``GET /metrics`` from any of them: the figures are the same whichever answers.

Where they are kept (docs/operations/metrics.md):

- ``METRICS_REDIS_URL`` (default ``REDIS_URL``) set, the production setup: each
  process adds to a buffer in its own memory (a dict under a lock, about a
  microsecond) and a background thread adds the buffer to one Redis hash every
  ``METRICS_FLUSH_SECONDS`` in one pipelined round trip. Every process on every
  machine adds to the same hash, so any web process anywhere answers the same
  figures; nothing on a request's path waits for Redis, and a Redis outage
  costs no request anything: the buffer keeps the counts (bounded by the number of
  series, not by time) until Redis answers again, and says so once a minute.
- no Redis, the embedded default (SQLite: one machine): prometheus-client's
  multiprocess mode, one memory-mapped file per process in
  ``PROMETHEUS_MULTIPROC_DIR``, summed at scrape time. It needs no server, and
  every process of the machine writes to the same directory.
"""

from __future__ import annotations

import atexit
import bisect
import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from config.observability.logging import Throttled

logger = logging.getLogger(__name__)
_warn = Throttled(logger)

DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SEP = "\x1f"


@dataclass(frozen=True)
class Metric:
    """A counter or histogram; label values are given positionally, in ``labels`` order."""

    name: str
    help: str
    labels: tuple[str, ...] = ()
    kind: str = "counter"
    buckets: tuple[float, ...] = field(default=DEFAULT_BUCKETS)

    @property
    def family(self) -> str:
        """The family's name: a counter's without ``_total`` (prometheus-client adds it)."""
        return self.name.removesuffix("_total") if self.kind == "counter" else self.name

    def inc(self, *values: str, amount: float = 1) -> None:
        """Never raises: a metric that cannot be recorded is dropped, and said once a minute."""
        try:
            store().inc(self, _clean(values), amount)
        except Exception as error:
            _warn.warning("record", "metrics: %s not recorded (%s: %s)", self.name, type(error).__name__, error)

    def observe(self, value: float, *values: str) -> None:
        try:
            store().observe(self, _clean(values), value)
        except Exception as error:
            _warn.warning("record", "metrics: %s not recorded (%s: %s)", self.name, type(error).__name__, error)


def _clean(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(str(value).replace(_SEP, " ") for value in values)


JOBS_FINISHED = Metric(
    "aijobs_jobs_finished_total", "Jobs reaching a final state", ("status", "job_type", "error_code")
)
MODEL_TOKENS = Metric(
    "aijobs_model_tokens_total", "Tokens of every model call reported (results and failed calls' logs)",
    ("api_key_mode",),
)  # fmt: skip
HTTP_REQUESTS = Metric("aijobs_http_requests_total", "HTTP requests answered", ("api", "status"))
HTTP_DURATION = Metric(
    "aijobs_http_request_duration_seconds", "Time to answer an HTTP request", ("api",), kind="histogram"
)
NOTIFICATIONS_FAILED = Metric("aijobs_notifications_failed_total", "Job-complete notices that could not be written")
PUSHES = Metric("aijobs_pushes_total", "Pushes to learners' devices, by try", ("platform", "outcome"))
ASYNCH_CALLS = Metric("asynch_model_calls_total", "Real model calls of model-asynch", ("model_name", "outcome"))
WEBHOOK_DELIVERIES = Metric("asynch_webhook_deliveries_total", "Webhook tries by what came of them", ("outcome",))

RECORDED: tuple[Metric, ...] = (JOBS_FINISHED, MODEL_TOKENS, HTTP_REQUESTS, HTTP_DURATION, NOTIFICATIONS_FAILED,
                                PUSHES, ASYNCH_CALLS, WEBHOOK_DELIVERIES)  # fmt: skip

# Label values known before anything happens, each given a 0 sample from the first scrape
# (``with_zeros``): a rate over a series that does not exist yet sees nothing, and the
# first event of a new series is lost to it. The ``api`` values are the middleware's; of
# the status codes, an answer and the two server errors the platform gives, which the
# server-error alert divides.
HTTP_APIS = ("internal", "user", "asynch", "auth", "admin", "other")
HTTP_SEEDED_STATUSES = ("200", "500", "503")
ASYNCH_OUTCOMES = ("ok", "error", "timeout")
PUSH_PLATFORMS = ("ios", "android")
PUSH_OUTCOMES = ("delivered", "retried", "device_disabled", "failed", "dropped")
WEBHOOK_OUTCOMES = ("delivered", "retried", "failed")


class Store(Protocol):
    def inc(self, metric: Metric, values: tuple[str, ...], amount: float) -> None: ...

    def observe(self, metric: Metric, values: tuple[str, ...], value: float) -> None: ...

    def flush(self) -> None: ...

    def collect(self) -> Iterable[Any]: ...


def _le(buckets: tuple[float, ...], index: int) -> str:
    return "+Inf" if index >= len(buckets) else repr(float(buckets[index]))


class RedisStore:
    """Buffered here, summed in one Redis hash (field: sample name and label values)."""

    def __init__(self, url: str, *, key: str, flush_seconds: float) -> None:
        import redis

        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
        self.key = key
        self._flush_seconds = flush_seconds
        self._lock = threading.Lock()
        # Held for a whole flush, so that a flush called while the background one is under
        # way returns once those counts are in Redis too (a scrape, a worker's exit).
        self._flushing = threading.Lock()
        self._pending: dict[str, float] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        os.register_at_fork(after_in_child=self._after_fork)
        atexit.register(self.flush)

    # --- the hot path: memory only ------------------------------------------------------

    def inc(self, metric: Metric, values: tuple[str, ...], amount: float) -> None:
        name = _SEP.join((metric.name, *values))
        with self._lock:
            self._pending[name] = self._pending.get(name, 0) + amount
            if self._thread is None:
                self._start()

    def observe(self, metric: Metric, values: tuple[str, ...], value: float) -> None:
        le = _le(metric.buckets, bisect.bisect_left(metric.buckets, value))
        bucket = _SEP.join((metric.name + "_bucket", *values, le))
        total = _SEP.join((metric.name + "_sum", *values))
        count = _SEP.join((metric.name + "_count", *values))
        with self._lock:
            pending = self._pending
            pending[bucket] = pending.get(bucket, 0) + 1
            pending[total] = pending.get(total, 0) + value
            pending[count] = pending.get(count, 0) + 1
            if self._thread is None:
                self._start()

    # --- the background flush -------------------------------------------------------------

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="metrics-flush", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._flush_seconds):
            self.flush()

    def _after_fork(self) -> None:
        # A forked child (a Celery prefork worker) starts empty: the parent flushes its own.
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._pending = {}
        self._thread = None
        self._stop = threading.Event()

    def flush(self) -> None:
        with self._flushing:
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return
        try:
            pipe = self._client.pipeline(transaction=False)
            for name, amount in pending.items():
                pipe.hincrbyfloat(self.key, name, amount)
            pipe.execute()
        except self._errors as error:
            with self._lock:  # keep the counts for the next flush: memory grows with series, not time
                for name, amount in pending.items():
                    self._pending[name] = self._pending.get(name, 0) + amount
            _warn.warning("flush", "metrics: Redis unreachable, counts kept in memory (%s)", type(error).__name__)

    # --- the scrape -------------------------------------------------------------------------

    def collect(self) -> list[Any]:
        self.flush()
        raw = self._client.hgetall(self.key)
        return families_from_samples({k.decode(): float(v) for k, v in raw.items()})


def families_from_samples(samples: dict[str, float]) -> list[Any]:
    """Prometheus families from the hash's fields, counters and histograms alike."""
    from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

    by_sample = {}
    for metric in RECORDED:
        if metric.kind == "counter":
            by_sample[metric.name] = (metric, "value")
        else:
            for suffix in ("_bucket", "_sum", "_count"):
                by_sample[metric.name + suffix] = (metric, suffix)
    counters: dict[str, dict[tuple[str, ...], float]] = {}
    histograms: dict[str, dict[tuple[str, ...], dict[str, Any]]] = {}
    for name, value in samples.items():
        sample, *values = name.split(_SEP)
        if sample not in by_sample:
            continue  # a metric this version no longer records
        metric, part = by_sample[sample]
        if part == "value":
            if len(values) == len(metric.labels):
                counters.setdefault(metric.name, {})[tuple(values)] = value
            continue
        series = histograms.setdefault(metric.name, {})
        if part == "_bucket":
            *labels, le = values
            entry = series.setdefault(tuple(labels), {"buckets": {}, "sum": 0.0})
            entry["buckets"][le] = value
        elif part == "_sum":
            series.setdefault(tuple(values), {"buckets": {}, "sum": 0.0})["sum"] = value
    families: list[Any] = []
    for metric in RECORDED:
        if metric.kind == "counter" and metric.name in counters:
            family = CounterMetricFamily(metric.family, metric.help, labels=metric.labels)
            for values, value in sorted(counters[metric.name].items()):
                family.add_metric(list(values), value)
            families.append(family)
        elif metric.kind == "histogram" and metric.name in histograms:
            family = HistogramMetricFamily(metric.name, metric.help, labels=metric.labels)
            for values, entry in sorted(histograms[metric.name].items()):
                cumulative, buckets = 0.0, []
                for index in range(len(metric.buckets) + 1):
                    le = _le(metric.buckets, index)
                    cumulative += entry["buckets"].get(le, 0.0)
                    buckets.append((le, cumulative))
                family.add_metric(list(values), buckets, entry["sum"])
            families.append(family)
    return families


def with_zeros(families: Iterable[Any], seeds: Mapping[Metric, Iterable[tuple[str, ...]]]) -> list[Any]:
    """``families`` (a store's ``collect``) with every recorded family present, and a 0
    sample for each label set of ``seeds`` not counted yet; a family without labels
    gets its one sample unasked."""
    from prometheus_client.metrics_core import Metric as Family

    found = list(families)
    by_name = {family.name: family for family in found}
    for metric in RECORDED:
        family = by_name.get(metric.family)
        if family is None:
            family = Family(metric.family, metric.help, metric.kind)
            found.append(family)
        counted_as = metric.name if metric.kind == "counter" else metric.name + "_count"
        counted = {
            tuple(sample.labels.get(label, "") for label in metric.labels)
            for sample in family.samples
            if sample.name == counted_as
        }
        for values in seeds.get(metric, ()) if metric.labels else [()]:
            if values in counted:
                continue
            counted.add(values)
            labels = dict(zip(metric.labels, values, strict=True))
            if metric.kind == "counter":
                family.add_sample(metric.name, labels, 0.0)
                continue
            for index in range(len(metric.buckets) + 1):
                family.add_sample(metric.name + "_bucket", {**labels, "le": _le(metric.buckets, index)}, 0.0)
            family.add_sample(metric.name + "_count", labels, 0.0)
            family.add_sample(metric.name + "_sum", labels, 0.0)
    return found


class MultiprocessStore:
    """prometheus-client's own multiprocess mode: files in ``PROMETHEUS_MULTIPROC_DIR``."""

    def __init__(self, path: str) -> None:
        from prometheus_client import values

        if values.ValueClass.__name__ != "MmapedValue":
            raise RuntimeError("PROMETHEUS_MULTIPROC_DIR must be set before prometheus_client is imported")
        os.makedirs(path, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._metrics: dict[str, Any] = {}

    def _metric(self, metric: Metric) -> Any:
        found = self._metrics.get(metric.name)
        if found is None:
            from prometheus_client import Counter, Histogram

            with self._lock:
                found = self._metrics.get(metric.name)
                if found is None:
                    if metric.kind == "counter":
                        found = Counter(metric.family, metric.help, metric.labels, registry=None)
                    else:
                        found = Histogram(
                            metric.name, metric.help, metric.labels, registry=None, buckets=metric.buckets
                        )
                    self._metrics[metric.name] = found
        return found

    def inc(self, metric: Metric, values: tuple[str, ...], amount: float) -> None:
        counter = self._metric(metric)
        (counter.labels(*values) if values else counter).inc(amount)

    def observe(self, metric: Metric, values: tuple[str, ...], value: float) -> None:
        histogram = self._metric(metric)
        (histogram.labels(*values) if values else histogram).observe(value)

    def flush(self) -> None:
        pass  # every inc is already in the process's file

    def collect(self) -> list[Any]:
        from prometheus_client.multiprocess import MultiProcessCollector

        return list(MultiProcessCollector(None, path=self.path).collect())


_store: Store | None = None
_store_lock = threading.Lock()


def store() -> Store:
    global _store
    if _store is None:
        with _store_lock:
            if _store is None:
                from django.conf import settings

                if settings.METRICS_REDIS_URL:
                    _store = RedisStore(
                        settings.METRICS_REDIS_URL,
                        key=settings.METRICS_REDIS_KEY,
                        flush_seconds=settings.METRICS_FLUSH_SECONDS,
                    )
                else:
                    _store = MultiprocessStore(settings.PROMETHEUS_MULTIPROC_DIR)
    return _store


def flush() -> None:
    """Push this process's buffer now (before a scrape, at a worker's exit)."""
    if _store is not None:
        try:
            _store.flush()
        except Exception as error:
            _warn.warning("flush", "metrics: flush failed (%s)", type(error).__name__)


def reset_store() -> None:
    """Forget the store, so the next record picks it from the settings again (tests)."""
    global _store
    with _store_lock:
        _store = None
