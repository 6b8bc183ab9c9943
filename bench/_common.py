"""Shared set-up for the benchmarks: a throwaway PostgreSQL database, migrated,
and a gunicorn serving it. Every benchmark prints its baseline beside it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN_URL = os.environ.get("BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
BENCH_DB = os.environ.get("BENCH_DB", "aijobs_bench")
BENCH_DB_URL = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + BENCH_DB
RUNTIME_TOKEN = "bench-runtime-token"


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


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its live children (gunicorn's workers), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
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
        **(extra_env or {}),
    }
    env.pop("REDIS_URL", None)
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


def report(title: str, rows: list[tuple[str, float, str]], baseline: str) -> None:
    """Print figures side by side with the baseline and each one's ratio to it."""
    base = dict((name, value) for name, value, _ in rows)[baseline]
    print(f"\n{title}")
    for name, value, unit in rows:
        print(f"  {name:<44} {value:>10.1f} {unit:<8} {value / base:>7.1%} of {baseline}")
