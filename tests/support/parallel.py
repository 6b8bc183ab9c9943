"""What the suite's pytest-xdist workers (``make test`` runs it with ``-n``) must not do at
the same time.

- ``cache_lock(path)``: one process at a time checks and builds a cache that every worker
  reuses (the runtime's virtualenv, the TypeScript client's npm packages under ``var/``);
  the others wait for it and find it built.
- A test marked ``serial`` runs alone: while it runs no other test of the run does (the
  other workers wait between two tests). For the tests whose claim is a time under a load
  of their own making (a push within 3 seconds, every worker following a pause within 5),
  each saying why beside its marker. A readers-writer lock over the run's workers: every
  other test holds it shared, a serial test exclusively, and a turnstile lets a waiting
  serial test in before any test that asks after it. Without xdist nothing is locked.
- ``SlowFilesFirst``: with ``--dist loadfile`` the files known to take longest go to the
  workers first (xdist's own order is by number of tests, which left the few long
  fault tests to the end, one worker running them while the other had nothing to do)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from xdist.scheduler import LoadFileScheduling

# The files that take longest, in seconds on one worker of the development machine (the
# sum of their slowest tests under --durations): only the order work is handed out in, so
# a stale number costs time, never a result. A file not listed goes after these, in xdist's order.
SLOW_FILES = {
    "tests/test_faults_broker.py": 115,
    "tests/test_bulk_operations_celery.py": 70,
    "tests/test_openapi_conformance.py": 62,
    "tests/test_faults_redis.py": 49,
    "tests/test_quickstart.py": 46,
    "tests/test_faults_network.py": 45,
    "tests/test_faults_postgres.py": 43,
    "tests/test_alerts_prometheus.py": 35,
    "tests/test_runtime_worker_e2e.py": 30,
    "tests/security/test_csp_browser.py": 28,
    "tests/test_two_machines.py": 26,
    "tests/security/test_usernames_migration.py": 26,
    "tests/security/test_admin_login.py": 25,
    "tests/test_heartbeat_hot.py": 24,
    "tests/security/test_input_nosniff.py": 19,
    "tests/test_migration_public_ids.py": 17,
    "tests/test_migration_job_id.py": 17,
    "tests/test_generated_typescript_client.py": 17,
    "tests/test_ops_gunicorn.py": 15,
    "tests/test_job_type_pause_processes.py": 15,
    "tests/security/test_probes.py": 15,
    "tests/test_throttles_embedded.py": 14,
    "tests/security/test_usernames.py": 13,
    "tests/test_runtime_worker_counts.py": 12,
    "tests/test_admin_browser.py": 12,
}


def _lock(path: Path, operation: int) -> IO[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    file = path.open("a")
    fcntl.flock(file, operation)
    return file  # closing it lets go


@contextlib.contextmanager
def cache_lock(cache: Path) -> Iterator[None]:
    """Held while ``cache`` (a folder) is checked and built: ``<cache>.lock`` beside it."""
    with _lock(cache.with_name(cache.name + ".lock"), fcntl.LOCK_EX):
        yield


def _run_folder() -> Path | None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # one per run, the same in each of its workers
    if not run or not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    return Path(tempfile.gettempdir()) / f"aijobs-xdist-{run}"


@contextlib.contextmanager
def slot(*, alone: bool) -> Iterator[None]:
    """Held around one test (its setup, call and teardown): shared, or alone if ``alone``."""
    folder = _run_folder()
    if folder is None:
        yield
        return
    turnstile = _lock(folder / "turnstile", fcntl.LOCK_EX)
    try:
        tests = _lock(folder / "tests", fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
    except BaseException:
        turnstile.close()
        raise
    if not alone:  # a serial test keeps the turnstile: no test starts until it is done
        turnstile.close()
    try:
        yield
    finally:
        tests.close()
        turnstile.close()


class SlowFilesFirst(LoadFileScheduling):
    """xdist's ``loadfile`` (a file's tests on one worker, in order), the longest files first."""

    def _assign_work_unit(self, node) -> None:
        # max() keeps the first of equals: the files not listed keep xdist's order.
        longest = max(self.workqueue, key=lambda scope: SLOW_FILES.get(scope, 0))
        self.workqueue.move_to_end(longest, last=False)
        super()._assign_work_unit(node)
