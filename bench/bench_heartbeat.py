"""Heartbeats as HOT updates, and the queries that read leases, on a large job table.

    .venv/bin/python -m bench.bench_heartbeat [--jobs 1000000] [--running 1000] [--seconds 60]

One database (``BENCH_DB``, default ``aijobs_bench_heartbeat``), migrated, loaded with
``--jobs`` jobs: ``--running`` of them running (their leases current), a tenth of the
rest pending, the others finished over 30 days. Two shapes of the job table, measured
in this order in the same run:

- the baseline, as the table was before: an index on ``lock_until``, PostgreSQL's
  default storage parameters (every page full, autovacuum after a fifth of the table);
- as the migrations leave it now (``ai_jobs`` 0010): no index on a column a heartbeat
  writes, room left on each page (``fillfactor``), autovacuum suited to a queue.

The table is rewritten (``VACUUM FULL``) after each change, so its pages are what that
shape makes them. For each shape:

- the heartbeat phase: the running jobs heartbeat through the service's statement
  (``ai_jobs.transitions.heartbeat``) from ``--threads`` threads, round-robin, for
  ``--seconds``; it prints the job table's updates and how many were HOT (heap-only:
  no index written), from ``pg_stat_user_tables``, and the share. The aim is 90%.
- the readers of leases, median (p95) over ``--samples``: a reaper pass
  (``jobs_reap``; each sample has ten lapsed leases to expire and put back) and the
  dashboard's queries (``ops.dashboard.dashboard_context``, in process).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("BENCH_DB", "aijobs_bench_heartbeat")

from bench._common import BENCH_DB_URL, fresh_database
from bench.bench_metrics import JOB_COLUMNS, TYPES

OLD_INDEX = "CREATE INDEX ai_job_lock_until ON ai_runtime_job (lock_until)"
INSTANCE = "rt-bench"
LAPSED = 10  # leases lapsed before each reaper sample


def load(conn: Any, jobs: int, running: int) -> None:
    user_id = conn.execute(
        "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, is_active, "
        "date_joined) VALUES ('!', false, 'bench', '', '', '', false, true, now()) RETURNING id"
    ).fetchone()[0]
    pending = (jobs - running) // 10
    finished = jobs - running - pending
    conn.execute(
        f"INSERT INTO ai_runtime_job ({JOB_COLUMNS}) SELECT 'job_h' || g, %s, {TYPES}, 'user', %s, "
        "(CASE WHEN g %% 100 < 93 THEN 'succeeded' WHEN g %% 100 < 98 THEN 'failed' ELSE 'cancelled' END), 0, "
        "'platform_key', 'deepseek', 'deepseek-chat', 'v1', 'v1', 1, '{}', false, 0, 3, 120, t, t, t, "
        "t + interval '40 seconds', NULL, 'rt-' || (g %% 8), NULL "
        "FROM (SELECT g, now() - (g * interval '30 days') / %s AS t FROM generate_series(1, %s) g) s",
        [user_id, str(user_id), finished, finished],
    )
    conn.execute(
        f"INSERT INTO ai_runtime_job ({JOB_COLUMNS}) SELECT 'job_p' || g, %s, {TYPES}, 'user', %s, 'pending', 0, "
        "'platform_key', 'deepseek', 'deepseek-chat', 'v1', 'v1', 0, '{}', false, 0, 3, 120, now(), "
        "now() - (g * interval '1 second'), now(), NULL, NULL, NULL, NULL FROM generate_series(1, %s) g",
        [user_id, str(user_id), pending],
    )
    conn.execute(
        f"INSERT INTO ai_runtime_job ({JOB_COLUMNS}, started_at, locked_at) SELECT 'job_r' || g, %s, {TYPES}, "
        "'user', %s, 'running', 0, 'platform_key', 'deepseek', 'deepseek-chat', 'v1', 'v1', 1, '{}', false, 0, 3, "
        "86400, now(), now() - interval '10 minutes', now(), NULL, NULL, %s, now() + interval '1 hour', now(), now() "
        "FROM generate_series(1, %s) g",
        [user_id, str(user_id), INSTANCE, running],
    )


def lease_all(conn: Any) -> None:
    """Every running job's lease current again, and the ten a reaper sample expires back."""
    conn.execute(
        "UPDATE ai_runtime_job SET status = 'running', locked_by = %s, lock_until = now() + interval '1 hour', "
        "deadline_ms = NULL, retry_count = 0, available_at = now() WHERE id LIKE 'job_r%%' "
        "AND (status <> 'running' OR lock_until < now() + interval '50 minutes')",
        [INSTANCE],
    )


def lapse_some(conn: Any) -> None:
    conn.execute(
        "UPDATE ai_runtime_job SET lock_until = now() - interval '1 second' WHERE id IN "
        "(SELECT id FROM ai_runtime_job WHERE id LIKE 'job_r%%' ORDER BY id LIMIT %s)",
        [LAPSED],
    )


def table_updates(conn: Any) -> tuple[int, int]:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return conn.execute(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'ai_runtime_job'::regclass"
    ).fetchone()


def heartbeats(conn: Any, *, running: int, threads: int, seconds: float) -> tuple[int, int, int]:
    """(heartbeats sent, updates, HOT updates) of the job table during the phase."""
    import datetime as dt

    from django.db import connection
    from django.utils import timezone

    from ai_jobs import transitions

    ids = [row[0] for row in conn.execute("SELECT id FROM ai_runtime_job WHERE id LIKE 'job_r%%' ORDER BY id")]
    time.sleep(1.1)  # earlier statistics flushed (at most once a second per backend)
    before = table_updates(conn)
    sent = [0] * threads
    stop = time.monotonic() + seconds
    lease = dt.timedelta(hours=1)

    def beat(index: int) -> None:
        mine = ids[index::threads]
        n = 0
        while time.monotonic() < stop:
            for job_id in mine:
                assert transitions.heartbeat(job_id=job_id, instance_id=INSTANCE, now=timezone.now(), lease=lease)
                n += 1
                if n % 64 == 0 and time.monotonic() >= stop:
                    break
        sent[index] = n
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_force_next_flush()")
        connection.close()

    pool = [threading.Thread(target=beat, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    time.sleep(1.1)
    after = table_updates(conn)
    return sum(sent), after[0] - before[0], after[1] - before[1]


def timed(run: Callable[[], Any], samples: int, before: Callable[[], Any] | None = None) -> tuple[float, float]:
    if before:
        before()
    run()  # warm: connection, plans, caches
    timings = []
    for _ in range(samples):
        if before:
            before()
        started = time.perf_counter()
        run()
        timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    return statistics.median(timings), timings[min(len(timings) - 1, int(len(timings) * 0.95))]


def readers(conn: Any, samples: int) -> dict[str, tuple[float, float]]:
    from django.utils import timezone

    from ai_jobs.services.reaper import jobs_reap
    from ops import dashboard

    def reap() -> None:
        assert jobs_reap()["expired"] == LAPSED

    figures = {
        "reaper pass": timed(reap, samples, before=lambda: (lease_all(conn), lapse_some(conn))),
        "dashboard queries": timed(lambda: dashboard.dashboard_context(timezone.now()), samples),
    }
    lease_all(conn)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000, help="rows of the job table")
    parser.add_argument("--running", type=int, default=1000, help="running jobs that heartbeat")
    parser.add_argument("--seconds", type=float, default=60, help="length of each heartbeat phase")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()

    import psycopg

    print(f"database {BENCH_DB_URL.rsplit('/', 1)[1]}: {args.jobs:,} jobs, {args.running:,} running", flush=True)
    fresh_database()
    os.environ.pop("REDIS_URL", None)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="bench-heartbeat-")
    os.environ["LOG_LEVEL"] = "WARNING"
    from bench._common import setup_django

    setup_django()
    conn = psycopg.connect(BENCH_DB_URL, autocommit=True)
    started = time.perf_counter()
    load(conn, args.jobs - args.running, args.running)
    print(f"  loaded in {time.perf_counter() - started:.0f} s", flush=True)
    now_options = conn.execute("SELECT reloptions FROM pg_class WHERE oid = 'ai_runtime_job'::regclass").fetchone()[0]

    names = [option.split("=", 1)[0] for option in now_options or []]
    shapes: dict[str, list[str]] = {
        "baseline: lock_until indexed, default storage": [OLD_INDEX]
        + ([f"ALTER TABLE ai_runtime_job RESET ({', '.join(names)})"] if names else []),
        f"now: {', '.join(now_options or ['no storage parameters'])}": ["DROP INDEX ai_job_lock_until"]
        + ([f"ALTER TABLE ai_runtime_job SET ({', '.join(now_options)})"] if now_options else []),
    }
    results: dict[str, tuple[tuple[int, int, int], dict[str, tuple[float, float]]]] = {}
    for title, statements in shapes.items():
        for sql in statements:
            conn.execute(sql)
        print(f"\n{title}: rewriting the table ...", flush=True)
        conn.execute("VACUUM FULL ANALYZE ai_runtime_job")
        beats = heartbeats(conn, running=args.running, threads=args.threads, seconds=args.seconds)
        sent, updates, hot = beats
        print(f"  heartbeats {sent:,} in {args.seconds:.0f} s; job table updates {updates:,}, HOT {hot:,}: "
              f"{hot / max(updates, 1):.1%} HOT", flush=True)  # fmt: skip
        figures = readers(conn, args.samples)
        for name, (median, p95) in figures.items():
            print(f"  {name:<20} {median:8.2f} ms median, {p95:8.2f} ms p95", flush=True)
        results[title] = (beats, figures)

    base_title, now_title = list(results)
    print(f"\n{args.jobs:,} jobs, {args.running:,} running heartbeating for {args.seconds:.0f} s")
    print(f"  {'':<28}{'baseline':>22}{'now':>22}{'ratio':>8}")
    (_, b_upd, b_hot), b_fig = results[base_title]
    (_, n_upd, n_hot), n_fig = results[now_title]
    print(f"  {'HOT share of updates':<28}{b_hot / max(b_upd, 1):>22.1%}{n_hot / max(n_upd, 1):>22.1%}")
    for name in b_fig:
        (bm, bp), (nm, np_) = b_fig[name], n_fig[name]
        print(f"  {name + ', ms':<28}{f'{bm:.2f} ({bp:.2f})':>22}{f'{nm:.2f} ({np_:.2f})':>22}{nm / bm:>7.2f}x")
    conn.close()


if __name__ == "__main__":
    sys.exit(main())
