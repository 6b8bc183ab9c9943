"""The reference Runtime: N job slots fed by claims, and a heartbeat thread that
keeps every lease alive and carries ``cancelRequested`` and lost leases back to
the jobs (``runtime_worker.job``). SIGTERM stops claiming, gives running jobs a
grace period, then has them report a retryable failure.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from runtime_worker import prompts
from runtime_worker.api import ApiError, ApiUnavailable, InternalApi
from runtime_worker.backoff import Backoff
from runtime_worker.config import RuntimeConfig
from runtime_worker.job import JobRun
from runtime_worker.model import ModelClient

logger = logging.getLogger("runtime_worker")

T = TypeVar("T")


class _Pool:
    """A fixed set of daemon threads fed from a queue. Daemon, so a model call
    that hangs never keeps the process from exiting; fixed, so each thread keeps
    its HTTP keep-alive sessions from job to job."""

    def __init__(self, size: int, name: str) -> None:
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = queue.SimpleQueue()
        for index in range(size):
            threading.Thread(target=self._work, name=f"{name}-{index}", daemon=True).start()

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        future: Future[T] = Future()
        self._queue.put((future, fn, args))
        return future

    def _work(self) -> None:
        while True:
            future, fn, args = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as error:
                future.set_exception(error)


class Runtime:
    """One runtime process: claims jobs for its capabilities into ``concurrency``
    slots and runs each end to end. ``run()`` blocks until ``request_stop()``."""

    def __init__(
        self, config: RuntimeConfig, *, api: InternalApi | None = None, model: ModelClient | None = None
    ) -> None:
        self.config = config
        # The fast path: a job's life is claim, heartbeats, result (a server that does not
        # know ``include`` hands out locked jobs, and each attempt asks for the rest).
        self.api = api or InternalApi(
            config.api_url,
            config.token,
            config.instance_id,
            timeout=config.api_timeout_seconds,
            include=("snapshot", "credential"),
        )
        self.model = model or ModelClient()
        self.stats: Counter[str] = Counter()
        self._active: dict[str, JobRun] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._grace_over = threading.Event()
        self._slot_freed = threading.Event()
        self._heartbeat_stop = threading.Event()
        self._stopped = threading.Event()
        self.hard_stop_at: float | None = None
        self._slots = _Pool(config.concurrency, f"job-{config.instance_id}")
        # Room for a model call per slot plus as many abandoned ones still in flight.
        self.model_pool = _Pool(config.concurrency * 2, f"model-{config.instance_id}")
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def request_stop(self) -> None:
        """Stop claiming; running jobs get ``grace_seconds`` to finish."""
        if not self._stopping.is_set():
            logger.info("runtime %s: stopping, %d job(s) running", self.config.instance_id, len(self._active))
        self._stopping.set()
        self._slot_freed.set()

    def abort_now(self) -> None:
        """End the grace period at once (a second SIGTERM)."""
        self.request_stop()
        self._grace_over.set()

    def start(self) -> threading.Thread:
        """Run in a background thread (tests, embedding)."""
        self._thread = threading.Thread(target=self.run, name=f"runtime-{self.config.instance_id}", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float | None = None) -> None:
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self) -> None:
        config = self.config
        logger.info(
            "runtime %s: %d slot(s) for %s against %s",
            config.instance_id,
            config.concurrency,
            ", ".join(config.capabilities),
            config.api_url,
        )
        missing = [t for t in config.capabilities if t not in prompts.job_types()]
        if missing:
            logger.warning("runtime %s: no v1 prompt for %s; such jobs fail", config.instance_id, ", ".join(missing))
        heartbeat = threading.Thread(target=self._heartbeat_loop, name=f"heartbeat-{config.instance_id}", daemon=True)
        heartbeat.start()
        try:
            self._claim_loop()
            self._drain()
        finally:
            self._heartbeat_stop.set()
            heartbeat.join(timeout=5)
            self._stopped.set()
            logger.info("runtime %s: stopped (%s)", config.instance_id, dict(self.stats))

    def _claim_loop(self) -> None:
        backoff = Backoff(first=0.5, most=30.0)
        poll = self.config.poll_interval_ms / 1000
        unreachable_since: float | None = None
        # A claim whose answer did not come: sent again as it was, with its claimId, until
        # an answer comes, so that the jobs it may have locked are answered, not orphaned.
        unanswered: tuple[str, int, float] | None = None
        while not self._stopping.is_set():
            with self._lock:
                free = self.config.concurrency - len(self._active)
            if unanswered is None and free <= 0:
                self._slot_freed.wait(timeout=1.0)
                self._slot_freed.clear()
                continue
            claim_id, free, asked_at = unanswered or (uuid.uuid4().hex, free, time.monotonic())
            try:
                jobs = self.api.claim(self.config.capabilities, free, claim_id=claim_id)
            except (ApiUnavailable, ApiError) as error:
                unanswered = (claim_id, free, asked_at) if isinstance(error, ApiUnavailable) else None
                if unreachable_since is None:
                    unreachable_since = time.monotonic()
                    logger.warning("runtime %s: cannot claim (%s); backing off", self.config.instance_id, error)
                self._stopping.wait(backoff.next(getattr(error, "retry_after", None)))
                continue
            except Exception:  # e.g. an answer this runtime cannot read: keep the process alive
                unanswered = None
                logger.exception("runtime %s: claim failed", self.config.instance_id)
                self._stopping.wait(backoff.next())
                continue
            if unreachable_since is not None:
                logger.info(
                    "runtime %s: API reachable again after %.1fs",
                    self.config.instance_id,
                    time.monotonic() - unreachable_since,
                )
                unreachable_since = None
            unanswered = None
            backoff.reset()
            self._start_jobs(jobs, asked_at)
            if len(jobs) < free:  # the queue is empty for us: wait before asking again
                self._stopping.wait(poll)
        if unanswered is not None:
            # Stopping with a claim unanswered: asked once more (it locks nothing more), what
            # it took runs within the grace period or is reported, rather than left locked.
            claim_id, free, asked_at = unanswered
            try:
                self._start_jobs(self.api.claim(self.config.capabilities, free, claim_id=claim_id), asked_at)
            except Exception as error:
                logger.warning("runtime %s: a claim left unanswered at shutdown (%s)", self.config.instance_id, error)

    def _start_jobs(self, jobs: list[Any], asked_at: float) -> None:
        for job in jobs:
            running = self._active.get(job.job_id)
            if running is not None and running.job.attempt_no == job.attempt_no:  # answered before: running here
                continue
            run = JobRun(self, job, asked_at=asked_at)
            with self._lock:
                self._active[job.job_id] = run
            self._slots.submit(run.run)

    def _drain(self) -> None:
        grace_end = time.monotonic() + self.config.grace_seconds
        while self._active and time.monotonic() < grace_end and not self._grace_over.is_set():
            self._slot_freed.wait(timeout=0.1)
            self._slot_freed.clear()
        with self._lock:
            left = list(self._active.values())
        if left:
            logger.warning(
                "runtime %s: grace period over, reporting %d unfinished job(s) as RUNTIME_SHUTDOWN",
                self.config.instance_id,
                len(left),
            )
            for run in left:
                run.abort_for_shutdown()
        self.hard_stop_at = time.monotonic() + self.config.final_report_seconds
        while self._active and time.monotonic() < self.hard_stop_at:
            self._slot_freed.wait(timeout=0.1)
            self._slot_freed.clear()

    def job_finished(self, run: JobRun, outcome: str) -> None:
        with self._lock:
            # The job's next attempt may have come back here already: only this attempt leaves.
            if self._active.get(run.job.job_id) is run:
                del self._active[run.job.job_id]
            self.stats[outcome] += 1
        self._slot_freed.set()

    # --- heartbeats ----------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_seconds
        while not self._heartbeat_stop.wait(interval):
            with self._lock:
                runs = [run for run in self._active.values() if not run.settled]
            for run in runs:
                try:
                    self.beat(run)
                except Exception:  # a bug must not stop the heartbeats of every other job
                    run.log.exception("heartbeat of %s failed", run.job.job_id)

    def beat(self, run: JobRun) -> None:
        """One heartbeat for one job; what it learns goes to the job's flags."""
        try:
            beat = self.api.heartbeat(run.job.job_id)
        except ApiUnavailable as error:
            run.log.debug("heartbeat of %s not delivered: %s", run.job.job_id, error)
            return
        except ApiError as error:
            if error.job_gone and not (run.settled or run.delivering):
                run.lose(error.message)
            elif not error.job_gone:
                run.log.warning("heartbeat of %s refused: %s", run.job.job_id, error)
            return
        run.job.lock_until_ms = beat.lock_until_ms
        if beat.cancel_requested:
            run.request_cancel()
