"""Table health at scale: claim latency, a dashboard render and a ``/metrics`` scrape
with 1,000,000 finished jobs (each with its snapshot, result, invocation log,
notification, and an analysis for a fifth of them) finished over the last 180 days,
before and after ``prune_data``; and the prune itself (rows a second, the time of one
batch). The baseline, measured in the same run on the same database, is the same
queue with no history at all.

    .venv/bin/python -m bench.bench_retention [--jobs 1000000] [--samples 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("BENCH_DB", "aijobs_bench_retention")

from bench._common import BENCH_DB_URL, fresh_database
from bench.bench_metrics import JOB_COLUMNS, TYPES

PENDING = 3_000  # the live queue: claimed from, then put back, in every phase
RECENT = 10_000  # finished in the last hour: what the dashboard draws
SNAPSHOT_PAYLOAD = (
    '{"learner": {"userId": "1"}, "knowledgePoints": [{"id": "kp_1", "mastery": 0.4}], '
    '"studyRecords": [{"isCorrect": true, "score": 80}, {"isCorrect": false, "score": 20}]}'
)
TABLES = ["ai_runtime_job", "ai_job_snapshot", "ai_runtime_result", "ai_invocation_log", "ai_notification"]


def load_history(conn: Any, user_id: int, jobs: int, days: int = 180) -> None:
    """``jobs`` finished jobs over ``days`` days, each with what hangs off it."""
    span = f"(g * interval '{days} days') / {jobs}"
    conn.execute(
        f"INSERT INTO ai_runtime_job ({JOB_COLUMNS}, snapshot_id) SELECT 'job_h' || g, %s, {TYPES}, 'user', %s, "
        "(CASE WHEN g %% 100 < 93 THEN 'succeeded' WHEN g %% 100 < 98 THEN 'failed' ELSE 'cancelled' END), 0, "
        "'platform_key', 'deepseek', 'deepseek-chat', 'v1', 'v1', 1, '{}', false, 0, 3, 120, t, t, t, "
        "t + interval '40 seconds', (CASE WHEN g %% 100 < 93 THEN NULL WHEN g %% 100 < 98 THEN 'MODEL_TIMEOUT' "
        "ELSE 'JOB_CANCELLED' END), 'rt-' || (g %% 8), NULL, 'snap_h' || g "
        f"FROM (SELECT g, now() - interval '2 hours' - {span} AS t FROM generate_series(1, %s) g) s",
        [user_id, str(user_id), jobs],
    )
    conn.execute(
        "INSERT INTO ai_job_snapshot (id, user_id, target_type, target_id, schema_version, payload, created_at, "
        "expires_at) SELECT 'snap_h' || substr(id, 6), user_id, 'user', target_id, 'v1', "
        f"'{SNAPSHOT_PAYLOAD}', "
        "created_at, created_at + interval '1 hour' FROM ai_runtime_job WHERE id LIKE 'job_h%%'"
    )
    conn.execute(
        "INSERT INTO ai_runtime_result (id, job_id, attempt_no, idempotency_key, output_hash, output_schema_version, "
        "output, prompt_tokens, completion_tokens, total_tokens, cost_cents, runtime_instance_id, created_at) "
        "SELECT 'res_h' || substr(id, 6), id, 1, id || ':1:' || md5(id), md5(id), 'v1', "
        """'{"summary": "steady", "masteryScore": 70}', 800, 200, 1000, 0.12, locked_by, finished_at """
        "FROM ai_runtime_job WHERE id LIKE 'job_h%%' AND status = 'succeeded'"
    )
    conn.execute(
        "INSERT INTO ai_invocation_log (job_id, attempt_no, runtime_instance_id, provider, model_name, request_id, "
        "started_at, latency_ms, http_status, prompt_tokens, completion_tokens, total_tokens, cost_cents, "
        "error_code, created_at) SELECT id, 1, locked_by, 'deepseek', 'deepseek-chat', 'req-' || id, "
        "finished_at - interval '3 seconds', 2900, 200, 800, 200, 1000, 0.12, error_code, finished_at "
        "FROM ai_runtime_job WHERE id LIKE 'job_h%%'"
    )
    conn.execute(
        "INSERT INTO ai_notification (id, user_id, job_id, target_type, target_id, created_at, kind, job_type, "
        "title, message, data) SELECT 'ntf_h' || substr(id, 6), user_id, id, 'user', target_id, finished_at, "
        "CASE WHEN status = 'succeeded' THEN 'job_succeeded' ELSE 'job_failed' END, job_type, 'Done', '', '{}' "
        "FROM ai_runtime_job WHERE id LIKE 'job_h%%' AND status IN ('succeeded', 'failed')"
    )
    conn.execute(
        "INSERT INTO ai_learning_analysis (id, user_id, job_id, target_type, target_id, created_at, summary, "
        "mastery_score, level, strengths, weaknesses, confidence) SELECT 'ana_h' || substr(id, 6), user_id, id, "
        "'user', target_id, finished_at, 'steady', 70, 'developing', '[]', '[]', 0.8 FROM ai_runtime_job "
        "WHERE id LIKE 'job_h%%' AND status = 'succeeded' AND job_type = 'learning_state_analysis'"
    )


def load_queue(conn: Any, user_id: int) -> None:
    """The live part: pending jobs to claim, and jobs finished in the last hour."""
    conn.execute(
        f"INSERT INTO ai_runtime_job ({JOB_COLUMNS}) SELECT 'job_p' || g, %s, 'learning_state_analysis', 'user', %s, "
        "'pending', 0, 'platform_key', 'deepseek', 'deepseek-chat', 'v1', 'v1', 0, '{}', false, 0, 3, 120, "
        "now() - interval '1 minute', now() - (g * interval '10 ms'), now(), NULL, NULL, NULL, NULL "
        "FROM generate_series(1, %s) g",
        [user_id, str(user_id), PENDING],
    )
    conn.execute(
        f"INSERT INTO ai_runtime_job ({JOB_COLUMNS}) SELECT 'job_r' || g, %s, {TYPES}, 'user', %s, "
        "(CASE WHEN g %% 10 < 9 THEN 'succeeded' ELSE 'failed' END), 0, 'platform_key', 'deepseek', "
        "'deepseek-chat', 'v1', 'v1', 1, '{}', false, 0, 3, 120, t, t, t, t + interval '40 seconds', "
        "(CASE WHEN g %% 10 = 9 THEN 'MODEL_TIMEOUT' END), 'rt-' || (g %% 8), NULL "
        "FROM (SELECT g, now() - (g * interval '1 hour') / %s - interval '1 minute' AS t "
        "FROM generate_series(1, %s) g) s",
        [user_id, str(user_id), RECENT, RECENT],
    )


def requeue(conn: Any) -> None:
    conn.execute(
        "UPDATE ai_runtime_job SET status = 'pending', locked_by = NULL, locked_at = NULL, lock_until = NULL, "
        "deadline_ms = NULL, attempt_no = 0 WHERE id LIKE 'job_p%%' AND status <> 'pending'"
    )


def timed(run: Callable[[], Any], samples: int) -> tuple[float, float]:
    run()  # warm: connection, plans, caches
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        run()
        timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    return statistics.median(timings), timings[min(len(timings) - 1, int(len(timings) * 0.95))]


def measure(samples: int) -> dict[str, tuple[float, float]]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from ai_jobs import services

    staff = get_user_model().objects.filter(username="bench-operator").first() or (
        get_user_model().objects.create_superuser("bench-operator", "op@example.com", "x")
    )
    client = Client()
    client.force_login(staff)

    def claim() -> None:
        services.job_claim(job_types=["learning_state_analysis"], limit=10, instance_id="bench")

    def dashboard() -> None:
        response = client.get("/admin/ai_jobs/airuntimejob/dashboard/")
        assert response.status_code == 200, response.status_code

    def scrape() -> None:
        response = client.get("/metrics")
        assert response.status_code == 200, response.status_code

    figures = {
        "claim of 10": timed(claim, samples),
        "dashboard render": timed(dashboard, max(5, samples // 5)),
        "GET /metrics": timed(scrape, max(5, samples // 5)),
    }
    connection.close()
    return figures


def sizes(conn: Any) -> dict[str, tuple[int, int]]:
    return {
        table: conn.execute(f"SELECT count(*), pg_total_relation_size('{table}') FROM {table}").fetchone()
        for table in TABLES
    }


def explain_picks() -> None:
    """The plan and time of each sweep's first batch pick, at full size."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from config.retention import _pick
    from ops import retention

    now = timezone.now()
    print("\nthe first batch's pick of each kind (EXPLAIN ANALYZE):")
    for sweep in retention.SWEEPS:
        with transaction.atomic():
            with CaptureQueriesContext(connection) as captured:
                _pick(sweep, now=now, cursor=None, limit=1000)
            for query in captured.captured_queries:
                _explain(query["sql"])


def _explain(sql: str) -> None:
    """The plan of a statement the pick ran, as it was sent (its values bound)."""
    from django.db import connection

    if sql.lstrip().upper().startswith("SELECT"):
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, COSTS OFF) " + sql)
            plan = [row[0] for row in cursor.fetchall()]
        scans = [line.strip() for line in plan if "Scan" in line]
        print(f"  {sql.split(' FROM ')[1].split()[0]:<24} {plan[-1].strip():<28} {'; '.join(scans)[:150]}")


def prune_timed() -> tuple[dict[str, dict[str, int]], float, list[float]]:
    from ops import retention

    batch_ms: list[float] = []
    last = time.perf_counter()

    def progress(kind: str, deleted: Any, batches: int) -> None:
        nonlocal last
        now = time.perf_counter()
        batch_ms.append((now - last) * 1000)
        last = now
        if batches % 100 == 0:
            print(f"  {kind}: {sum(deleted.values()):,} rows so far", flush=True)

    started = time.perf_counter()
    report = retention.data_prune(progress=progress)
    return {kind: dict(counts) for kind, counts in report.kinds.items()}, time.perf_counter() - started, batch_ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()

    import psycopg

    print(f"database {BENCH_DB_URL.rsplit('/', 1)[1]}: the queue ({PENDING:,} pending, {RECENT:,} finished in the "
          "last hour), no history", flush=True)  # fmt: skip
    fresh_database()
    os.environ.pop("REDIS_URL", None)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="bench-retention-")
    os.environ["LOG_LEVEL"] = "WARNING"
    from bench._common import setup_django

    setup_django()
    conn = psycopg.connect(BENCH_DB_URL, autocommit=True)
    user_id = conn.execute(
        "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, is_active, "
        "date_joined) VALUES ('!', false, 'bench', '', '', '', false, true, now()) RETURNING id"
    ).fetchone()[0]
    load_queue(conn, user_id)
    conn.execute("VACUUM ANALYZE")
    phases: dict[str, dict[str, tuple[float, float]]] = {"baseline: no history": measure(args.samples)}
    requeue(conn)

    started = time.perf_counter()
    print(f"loading {args.jobs:,} finished jobs over 180 days with their snapshots, results, logs, notices ...",
          flush=True)  # fmt: skip
    load_history(conn, user_id, args.jobs)
    conn.execute("VACUUM ANALYZE")
    print(f"  loaded in {time.perf_counter() - started:.0f} s", flush=True)
    before_sizes = sizes(conn)
    phases[f"{args.jobs:,} finished jobs"] = measure(args.samples)
    requeue(conn)

    explain_picks()
    print("prune_data ...", flush=True)
    deleted, seconds, batch_ms = prune_timed()
    after_prune = measure(args.samples)
    requeue(conn)
    phases["after prune_data"] = after_prune
    conn.execute("VACUUM ANALYZE")
    phases["after prune_data and VACUUM"] = measure(args.samples)
    after_sizes = sizes(conn)

    rows = sum(n for counts in deleted.values() for key, n in counts.items() if key != "files")
    batch_ms.sort()
    print(f"\nprune_data: {rows:,} rows in {seconds:.1f} s ({rows / seconds:,.0f} rows/s), {len(batch_ms)} batches of "
          f"up to 1,000: a batch {statistics.median(batch_ms):.1f} ms median, "
          f"{batch_ms[int(len(batch_ms) * 0.95)]:.1f} ms p95, {batch_ms[-1]:.1f} ms max")  # fmt: skip
    for kind, counts in deleted.items():
        print(f"  {kind:<18} {', '.join(f'{key} {n:,}' for key, n in counts.items()) or '-'}")
    print("\ntable           rows before    rows after   size before    size after")
    for table in TABLES:
        (n0, s0), (n1, s1) = before_sizes[table], after_sizes[table]
        print(f"  {table:<20} {n0:>11,} {n1:>13,} {s0 / 2**20:>10.0f} MB {s1 / 2**20:>10.0f} MB")

    base = phases["baseline: no history"]
    print("\nmedian (p95) ms, and the median's ratio to the baseline")
    print(f"  {'':<32}" + "".join(f"{name:>26}" for name in base))
    for phase, figures in phases.items():
        cells = "".join(f"{f'{m:.1f} ({p:.1f}) {m / base[name][0]:.2f}x':>26}" for name, (m, p) in figures.items())
        print(f"  {phase:<32}{cells}")
    conn.close()


if __name__ == "__main__":
    sys.exit(main())
