"""What observability costs, each figure beside its baseline from the same run.

1. Database time of one ``GET /metrics`` with 1,000,000 jobs in the table (mostly
   finished history, 10,000 open; then again with a deep queue of 500,000 pending),
   against the queries the dashboard ran before this work (GROUP BY over the whole
   table). Time is measured around each statement the scrape sends, median of runs.
2. CPU per request of the observability middleware (request id, log context, the
   two HTTP metrics): the same ``GET /healthz`` through Django's full stack in
   process, with and without it, for each counter store (Redis, multiprocess files);
   and through gunicorn (one worker), reading the worker's CPU time from /proc.

    .venv/bin/python -m bench.bench_metrics [--jobs 1000000] [--scrapes 15] [--requests 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("BENCH_DB", "aijobs_bench_metrics")

from bench._common import BENCH_DB_URL, ROOT, free_port, fresh_database

BENCH_REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")

# The old dashboard's queries (ai_jobs.selectors.queue_overview before this change).
NAIVE = [
    "SELECT status, job_type, COUNT(id) FROM ai_runtime_job GROUP BY status, job_type",
    "SELECT COUNT(id) FILTER (WHERE available_at <= now()), COUNT(id) FILTER (WHERE available_at > now()), "
    "MIN(created_at) FROM ai_runtime_job WHERE status = 'pending'",
    "SELECT COUNT(id), COUNT(id) FILTER (WHERE lock_until < now()) FROM ai_runtime_job "
    "WHERE status IN ('locked', 'running')",
    "SELECT status, COUNT(id) FROM ai_runtime_job WHERE finished_at >= now() - interval '1 hour' GROUP BY status",
    "SELECT error_code, COUNT(id) FROM ai_runtime_job WHERE updated_at >= now() - interval '24 hours' "
    "AND error_code IS NOT NULL GROUP BY error_code ORDER BY 2 DESC LIMIT 10",
]

JOB_COLUMNS = (
    "id, user_id, job_type, target_type, target_id, status, priority, api_key_mode, model_provider, model_name, "
    "prompt_version, output_schema_version, attempt_no, params, cancel_requested, retry_count, max_retry_count, "
    "timeout_seconds, available_at, created_at, updated_at, finished_at, error_code, locked_by, lock_until"
)
TYPES = "(ARRAY['learning_state_analysis','weak_point_analysis','next_action_planning','quiz_generation'," \
        "'flashcard_generation'])[1 + g %% 5]"  # fmt: skip


def load(conn, jobs: int, open_jobs: int) -> None:  # type: ignore[no-untyped-def]
    """``jobs`` rows: ``open_jobs`` pending/locked/running, the rest finished over 30 days."""
    user_id = conn.execute(
        "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, is_active, "
        "date_joined) VALUES ('!', false, 'bench', '', '', '', false, true, now()) RETURNING id"
    ).fetchone()[0]
    finished = jobs - open_jobs
    conn.execute(
        f"INSERT INTO ai_runtime_job ({JOB_COLUMNS}) SELECT 'job_h' || g, %s, {TYPES}, 'user', %s, "
        "(CASE WHEN g %% 100 < 93 THEN 'succeeded' WHEN g %% 100 < 98 THEN 'failed' ELSE 'cancelled' END), 0, "
        "'platform_key', 'deepseek', 'deepseek-chat', 'v1', 'v1', 1, '{}', false, 0, 3, 120, t, t, t, "
        "t + interval '40 seconds', (CASE WHEN g %% 100 < 93 THEN NULL WHEN g %% 100 < 98 THEN "
        "(ARRAY['MODEL_TIMEOUT','MODEL_RATE_LIMIT','JOB_TIMEOUT'])[1 + g %% 3] ELSE 'JOB_CANCELLED' END), "
        "'rt-' || (g %% 8), NULL FROM (SELECT g, now() - (g * interval '30 days') / %s AS t "
        "FROM generate_series(1, %s) g) s",
        [user_id, str(user_id), finished, finished],
    )
    conn.execute(
        f"INSERT INTO ai_runtime_job ({JOB_COLUMNS}) SELECT 'job_o' || g, %s, {TYPES}, 'user', %s, "
        "(CASE WHEN g %% 10 < 8 THEN 'pending' WHEN g %% 10 < 9 THEN 'running' ELSE 'locked' END), 0, "
        "'platform_key', 'deepseek', 'deepseek-chat', 'v1', 'v1', 1, '{}', false, 0, 3, 120, "
        "(CASE WHEN g %% 10 = 0 THEN now() + interval '2 minutes' ELSE now() - interval '1 minute' END), "
        "now() - (g * interval '1 second'), now(), NULL, NULL, "
        "(CASE WHEN g %% 10 >= 8 THEN 'rt-' || (g %% 8) END), "
        "(CASE WHEN g %% 10 >= 8 THEN now() + (CASE WHEN g %% 200 = 8 THEN interval '-5 seconds' "
        "ELSE interval '50 seconds' END) END) FROM generate_series(1, %s) g",
        [user_id, str(user_id), open_jobs],
    )


def db_time_of(run, scrapes: int) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """Median milliseconds spent in the database by ``run()``, and its statement count."""
    import logging

    from django.db import connection

    spent: list[float] = []

    class Timed(logging.Handler):
        """Each statement's time, as Django's debug cursor measured it (full precision)."""

        def emit(self, record: logging.LogRecord) -> None:
            spent.append(record.__dict__["duration"])

    backends = logging.getLogger("django.db.backends")
    handler, level = Timed(), backends.level
    runs = []
    statements = 0
    run()  # warm: connection, plans, caches
    backends.addHandler(handler)
    backends.setLevel(logging.DEBUG)
    connection.force_debug_cursor = True
    try:
        for _ in range(scrapes):
            spent.clear()
            run()
            runs.append(sum(spent) * 1000)
            statements = len(spent)
    finally:
        connection.force_debug_cursor = False
        backends.setLevel(level)
        backends.removeHandler(handler)
    return statistics.median(runs), statements


def naive_scrape() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for sql in NAIVE:
            cursor.execute(sql)
            cursor.fetchall()


def scrape_part(jobs: int, scrapes: int) -> None:
    import psycopg

    print(f"loading {jobs:,} jobs into {BENCH_DB_URL.rsplit('/', 1)[1]} ...", flush=True)
    fresh_database()
    with psycopg.connect(BENCH_DB_URL, autocommit=True) as conn:
        load(conn, jobs, open_jobs=10_000)
        conn.execute("VACUUM ANALYZE ai_runtime_job")
    os.environ.pop("REDIS_URL", None)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="bench-metrics-")
    from bench._common import setup_django

    setup_django()
    from django.utils import timezone

    from ops import dashboard, metrics

    def report_case(title: str) -> None:
        scrape_ms, scrape_n = db_time_of(metrics.render, scrapes)
        naive_ms, naive_n = db_time_of(naive_scrape, scrapes)
        board_ms, board_n = db_time_of(lambda: dashboard.dashboard_context(timezone.now()), max(3, scrapes // 3))
        wall = []
        for _ in range(scrapes):
            started = time.perf_counter()
            metrics.render()
            wall.append((time.perf_counter() - started) * 1000)
        print(f"\n{title}")
        print(f"  GET /metrics, database time           {scrape_ms:8.2f} ms  ({scrape_n} statements)")
        print(f"  baseline: the old dashboard's queries {naive_ms:8.2f} ms  ({naive_n} statements)")
        print(f"  ratio /metrics / baseline             {scrape_ms / naive_ms:8.1%}")
        print(f"  GET /metrics, whole render (wall)     {statistics.median(wall):8.2f} ms")
        print(f"  dashboard, database time              {board_ms:8.2f} ms  ({board_n} statements)")

    report_case(f"{jobs:,} jobs: 10,000 open (8,000 pending), the rest finished over 30 days")
    with psycopg.connect(BENCH_DB_URL, autocommit=True) as conn:
        conn.execute(
            "UPDATE ai_runtime_job SET status = 'pending', finished_at = NULL, error_code = NULL "
            "WHERE id IN (SELECT id FROM ai_runtime_job WHERE status = 'succeeded' LIMIT %s)",
            [jobs * 49 // 100],
        )
        conn.execute("VACUUM ANALYZE ai_runtime_job")
        pending = conn.execute("SELECT count(*) FROM ai_runtime_job WHERE status = 'pending'").fetchone()[0]
    report_case(f"{jobs:,} jobs, a deep queue: {pending:,} pending")


# --- part 2: CPU per request --------------------------------------------------------------------


def cpu_in_process(requests_count: int) -> dict[str, float]:
    """µs of this process's CPU per GET /healthz through Django's full stack, with and
    without the observability middleware, alternating rounds; the flush thread's CPU
    counts too (process_time is the whole process's)."""
    import django
    from django.conf import settings

    django.setup()
    from django.core.handlers.wsgi import WSGIHandler
    from django.test.utils import override_settings

    from config.observability import metrics

    with_it = WSGIHandler()
    with override_settings(MIDDLEWARE=[m for m in settings.MIDDLEWARE if not m.startswith("config.observability.")]):
        without_it = WSGIHandler()

    def environ() -> dict[str, object]:
        import io

        return {"REQUEST_METHOD": "GET", "PATH_INFO": "/healthz", "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1",
                "SERVER_PORT": "80", "wsgi.input": io.BytesIO(), "wsgi.url_scheme": "http", "HTTP_HOST": "127.0.0.1",
                "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.errors": sys.stderr}  # fmt: skip

    def run(handler: WSGIHandler, n: int) -> float:
        started = time.process_time()
        for _ in range(n):
            body = handler(environ(), lambda status, headers: None)
            b"".join(body)
            body.close()
        return time.process_time() - started

    run(with_it, 500)
    run(without_it, 500)
    totals = {"with": 0.0, "without": 0.0}
    rounds = 5
    for _ in range(rounds):
        totals["without"] += run(without_it, requests_count // rounds)
        totals["with"] += run(with_it, requests_count // rounds)
    metrics.flush()
    per = {key: value / requests_count * 1e6 for key, value in totals.items()}
    return {**per, "delta": per["with"] - per["without"]}


def cpu_part(requests_count: int) -> None:
    print(f"\nCPU per request of the observability middleware, GET /healthz x {requests_count:,} (in process)")
    for store, env in (
        ("Redis (buffered, flushed each second)", {"REDIS_URL": BENCH_REDIS_URL, "METRICS_REDIS_KEY": "bench:metrics"}),
        ("multiprocess files (embedded default)", {"REDIS_URL": "", "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp()}),
    ):
        child_env = {**os.environ, "DATABASE_URL": BENCH_DB_URL, "DJANGO_SETTINGS_MODULE": "config.settings",
                     "LOG_LEVEL": "WARNING", **env}  # fmt: skip
        if not env["REDIS_URL"]:
            child_env.pop("REDIS_URL")
        out = subprocess.run(
            [sys.executable, "-m", "bench.bench_metrics", "--cpu-child", str(requests_count)],
            cwd=ROOT, env=child_env, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        figures = json.loads(out.strip().splitlines()[-1])
        print(f"  {store:<40} {figures['with']:7.1f} µs with, {figures['without']:7.1f} µs without: "
              f"{figures['delta']:+6.1f} µs ({figures['delta'] / figures['without']:+.1%})")  # fmt: skip
    import redis

    redis.Redis.from_url(BENCH_REDIS_URL).delete("bench:metrics")


def worker_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def gunicorn_part(requests_count: int) -> None:
    import requests

    print(f"\nCPU per request of one gunicorn worker (1 thread), GET /healthz x {requests_count:,}, Redis store")
    results = {}
    for name, module in (("without", "bench.settings_no_observability"), ("with", "config.settings")):
        port = free_port()
        env = {**os.environ, "DATABASE_URL": BENCH_DB_URL, "DJANGO_SETTINGS_MODULE": module, "LOG_LEVEL": "WARNING",
               "REDIS_URL": BENCH_REDIS_URL, "METRICS_REDIS_KEY": "bench:metrics"}  # fmt: skip
        master = subprocess.Popen(
            [str(Path(sys.executable).parent / "gunicorn"), "config.wsgi", "-c", "config/gunicorn.py", "--bind",
             f"127.0.0.1:{port}", "--workers", "1", "--threads", "1", "--log-level", "warning"],
            cwd=ROOT, env=env,
        )  # fmt: skip
        try:
            session = requests.Session()
            for _ in range(100):
                try:
                    session.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                    break
                except requests.RequestException:
                    time.sleep(0.1)
            for _ in range(300):
                session.get(f"http://127.0.0.1:{port}/healthz")
            worker = int(
                subprocess.run(["pgrep", "-P", str(master.pid)], capture_output=True, text=True).stdout.split()[0]
            )
            before = worker_cpu(worker)
            for _ in range(requests_count):
                session.get(f"http://127.0.0.1:{port}/healthz")
            time.sleep(1.2)  # one flush of the buffer, counted too
            results[name] = (worker_cpu(worker) - before) / requests_count * 1e6
        finally:
            master.terminate()
            master.wait(timeout=30)
    delta = results["with"] - results["without"]
    print(f"  {'gunicorn worker':<40} {results['with']:7.1f} µs with, {results['without']:7.1f} µs without: "
          f"{delta:+6.1f} µs ({delta / results['without']:+.1%}); clock ticks are 10 ms, so ± a few µs")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--scrapes", type=int, default=15)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--cpu-child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--skip-scrape", action="store_true")
    args = parser.parse_args()
    if args.cpu_child:
        print(json.dumps(cpu_in_process(args.cpu_child)))
        return
    if not args.skip_scrape:
        scrape_part(args.jobs, args.scrapes)
    cpu_part(args.requests)
    gunicorn_part(args.requests // 4)


if __name__ == "__main__":
    main()
