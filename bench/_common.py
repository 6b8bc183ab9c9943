"""Shared set-up for the benchmarks: a throwaway PostgreSQL database, migrated,
and a gunicorn serving it. Every benchmark prints its baseline beside it."""

from __future__ import annotations

import base64
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import redis

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN_URL = os.environ.get("BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
BENCH_DB = os.environ.get("BENCH_DB", "aijobs_bench")
BENCH_DB_URL = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + BENCH_DB
RUNTIME_TOKEN = "bench-runtime-token-0123456789abcdef"  # 32 or more: gunicorn refuses less
# Every benchmark's own database connections carry this name (PGAPPNAME), so the CPU of
# the backends serving the measured processes leaves them out.
BENCH_APPNAME = "bench"
os.environ["PGAPPNAME"] = BENCH_APPNAME
# Measured as production runs (DEBUG false), every process needs the settings it refuses
# to start without: throwaway values, fresh for each run, passed on to what it spawns.
os.environ.setdefault("SECRET_KEY", "bench-only-" + secrets.token_urlsafe(40))
os.environ.setdefault("CREDENTIAL_ENCRYPTION_KEYS", "bench:" + base64.b64encode(os.urandom(32)).decode())


def fresh_database() -> str:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{BENCH_DB}"')
    env = {**os.environ, "DATABASE_URL": BENCH_DB_URL}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return BENCH_DB_URL


def setup_django() -> None:
    os.environ["DATABASE_URL"] = BENCH_DB_URL
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_seconds(pid: int, *, children: bool = True) -> float:
    """User + system CPU of a process and (``children``) its live children (gunicorn's
    workers), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    if not children:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / ticks
    total = 0.0
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.parent.name) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


@contextmanager
def gunicorn(
    *,
    workers: int = 2,
    threads: int = 4,
    extra_env: dict[str, str] | None = None,
    started: list[subprocess.Popen] | None = None,
) -> Iterator[str]:
    """The project served by gunicorn; its process is appended to ``started`` (for its CPU)."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": BENCH_DB_URL,
        "RUNTIME_SERVICE_TOKENS": RUNTIME_TOKEN,
        "RUNTIME_THROTTLE_RATE": "100000000/min",
        "USER_THROTTLE_RATE": "100000000/min",
        "PLATFORM_DEEPSEEK_API_KEY": "sk-bench",
        "LOG_LEVEL": "WARNING",
        "PGAPPNAME": "gunicorn",
        **(extra_env or {}),
    }
    # The production shape: cache and throttles in Redis (BENCH_REDIS_URL, emptied first), as
    # bench_e2e runs it; without it every request would count its throttle in the database.
    env["REDIS_URL"] = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
    redis.Redis.from_url(env["REDIS_URL"]).flushdb()
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "config.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", str(workers), "--threads", str(threads), "--log-level", "warning"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    if started is not None:
        started.append(process)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


class BackendSampler:
    """CPU of the PostgreSQL backends serving a run, and the backends each process
    opened: every 50 ms, the client backends of the bench database (``pg_stat_activity``,
    by application name, the bench's own left out) and their CPU from ``/proc``
    (PostgreSQL runs on this machine). A backend's CPU counts from its first sighting
    (or from the start, for one already there) to its last."""

    def __init__(self, database_url: str) -> None:
        self.conn = psycopg.connect(database_url, autocommit=True)
        self.started: dict[tuple[int, object], float] = {}
        self.last: dict[tuple[int, object], float] = {}
        self.app_of: dict[tuple[int, object], str] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self, *, baseline: bool = False) -> None:
        rows = self.conn.execute(
            "SELECT pid, backend_start, application_name FROM pg_stat_activity "
            "WHERE datname = current_database() AND backend_type = 'client backend' AND application_name <> %s",
            [BENCH_APPNAME],
        ).fetchall()
        for pid, started, app in rows:
            key = (pid, started)
            cpu = cpu_seconds(pid, children=False)
            if key not in self.started:
                # A backend born during the run counts from 0 (its start-up is the run's too).
                self.started[key] = cpu if baseline else 0.0
                self.app_of[key] = app or "?"
            self.last[key] = cpu

    def _run(self) -> None:
        while not self.stop.wait(0.05):
            self._sample()

    def sessions(self) -> int:
        return int(
            self.conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()").fetchone()[0]
        )

    def __enter__(self) -> BackendSampler:
        self._sample(baseline=True)
        self.baseline_keys = set(self.started)
        self.sessions_before = self.sessions()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self._sample()
        self.sessions_opened = self.sessions() - self.sessions_before
        self.conn.close()

    def cpu(self) -> float:
        return sum(self.last[key] - self.started[key] for key in self.started)

    def opened_by_process(self) -> dict[str, int]:
        opened: dict[str, int] = {}
        for key, app in self.app_of.items():
            if key not in self.baseline_keys:
                opened[app] = opened.get(app, 0) + 1
        return opened

    def open_by_process(self) -> dict[str, int]:
        seen: dict[str, int] = {}
        for app in self.app_of.values():
            seen[app] = seen.get(app, 0) + 1
        return seen


def run_threads(threads: int, worker: Callable[[int], int]) -> float:
    """Run ``worker`` on ``threads`` threads until each returns; jobs per second."""
    done = [0] * threads
    barrier = threading.Barrier(threads + 1)

    def target(i: int) -> None:
        barrier.wait()
        done[i] = worker(i)

    pool = [threading.Thread(target=target, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in pool:
        thread.join()
    return sum(done) / (time.perf_counter() - started)


def machine_cpu_seconds() -> float:
    """CPU time of the whole machine (every process, the kernel's work for them), from /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(value) for value in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def report(title: str, rows: list[tuple[str, float, str]], baseline: str) -> None:
    """Print figures side by side with the baseline and each one's ratio to it."""
    base = dict((name, value) for name, value, _ in rows)[baseline]
    print(f"\n{title}")
    for name, value, unit in rows:
        print(f"  {name:<44} {value:>10.1f} {unit:<8} {value / base:>7.1%} of {baseline}")
