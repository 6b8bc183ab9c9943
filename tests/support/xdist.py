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
  serial test in before any test that asks after it. Without xdist nothing is locked."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


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
