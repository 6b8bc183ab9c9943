"""Test-only values for the settings that a process with DEBUG false refuses to start
without (``SECRET_KEY``, ``CREDENTIAL_ENCRYPTION_KEYS``). Loaded as a plugin before
anything else (``-p tests.environment`` in pyproject's addopts), so they are in
``os.environ`` before pytest-django imports the settings, and every server, worker and
runtime a test spawns with the environment copied gets the same ones. Fresh for each
run and never a known value; one the caller set already is kept.

Under pytest-xdist (``make test`` runs the suite with ``-n``) each worker process is a
machine of its own in everything the tests share: xdist names the worker in
``PYTEST_XDIST_WORKER`` (``gw0``, ``gw1``...) before this plugin loads, and here the
worker gets its own Redis database (the given one plus the worker's number: the cache,
throttles, metrics, semaphores and the Celery broker of the workers a test starts), its
own ``VAR_DIR`` (``var/xdist/gw0``...) and its own ``PROMETHEUS_MULTIPROC_DIR``, in
``os.environ`` so every process a test starts has them too. pytest-django gives each
worker its own test database (``test_aijobs_gw0``...), and xdist its own temporary
folder; every server a test starts listens on a free port."""

from __future__ import annotations

import base64
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
REDIS_DATABASES = 16  # redis-server's default `databases`

_TEST_VALUES = {
    "SECRET_KEY": "test-only-" + secrets.token_urlsafe(40),
    "CREDENTIAL_ENCRYPTION_KEYS": "test:" + base64.b64encode(os.urandom(32)).decode(),
}

# The names this plugin set (not those the caller had): a test that needs a process
# without them (make run's own development values) leaves these out. An xdist worker
# inherits the values from the controller, where this plugin set them first: the names
# come along in AIJOBS_TEST_SUPPLIED.
SUPPLIED = frozenset(
    {name for name, value in _TEST_VALUES.items() if os.environ.setdefault(name, value) == value}
    | {name for name in os.environ.get("AIJOBS_TEST_SUPPLIED", "").split(",") if name in _TEST_VALUES}
)
os.environ["AIJOBS_TEST_SUPPLIED"] = ",".join(sorted(SUPPLIED))


def _worker_redis_url(url: str, number: int) -> str:
    """``url`` with its database number moved up by ``number`` (redis://host:6379/1 -> /3 for gw2)."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        return url  # memory://, amqp://: nothing shared in Redis
    database = int(parts.path.strip("/") or 0) + number
    if database >= REDIS_DATABASES:
        raise RuntimeError(f"{url} has no database {database} for xdist worker {number}: give a lower one")
    return urlunsplit(parts._replace(path=f"/{database}"))


def _per_worker() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    # Once: a process a test starts inherits both variables, and its own settings are already the worker's.
    if not worker or os.environ.get("AIJOBS_TEST_WORKER") == worker:
        return
    os.environ["AIJOBS_TEST_WORKER"] = worker
    number = int(worker.removeprefix("gw"))
    for name in ("REDIS_URL", "METRICS_REDIS_URL", "ASYNCH_SEMAPHORE_REDIS_URL", "CELERY_BROKER_URL"):
        if os.environ.get(name):  # only those given: an unset one keeps its default (REDIS_URL's, or none)
            os.environ[name] = _worker_redis_url(os.environ[name], number)
    var_dir = Path(os.environ.get("VAR_DIR") or ROOT / "var") / "xdist" / worker
    var_dir.mkdir(parents=True, exist_ok=True)
    os.environ["VAR_DIR"] = str(var_dir)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]) / worker)


_per_worker()
