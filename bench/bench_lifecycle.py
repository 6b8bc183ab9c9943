"""The job lifecycle — claim, heartbeat, result — in jobs per second:

1. raw SQL through psycopg: the three transitions with nothing on top (the floor);
2. raw SQL doing every statement the service's result transaction does (the job's
   move, the result, its record, the user's notice, and the user's and the platform's
   usage with the breaker in one statement): the floor for the same work;
3. the service layer (ai_jobs.services) in-process, without HTTP;
4. the internal HTTP API through gunicorn, with several runtime threads;

then where a job's CPU goes over HTTP (the machine, gunicorn, this benchmark's client, the rest),
and the latency of one claim with 10,000 and with 1,000,000 pending rows.

    .venv/bin/python -m bench.bench_lifecycle [--jobs 3000] [--threads 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable

import psycopg
import requests

from bench._common import (
    BENCH_DB_URL,
    RUNTIME_TOKEN,
    cpu_seconds,
    fresh_database,
    gunicorn,
    machine_cpu_seconds,
    report,
    run_threads,
    setup_django,
)
from bench.lifecycle_sql import (
    RAW_ANALYSIS,
    RAW_CLAIM,
    RAW_HEARTBEAT,
    RAW_NOTICE,
    RAW_RESULT,
    RAW_SUCCEED,
    RAW_USAGE,
    insert_pending,
)

OUTPUT = {
    "summary": "ok",
    "masteryScore": 50,
    "level": "developing",
    "strengths": [],
    "weaknesses": [],
    "confidence": 0.5,
}


# --- 1. raw SQL -------------------------------------------------------------------------------


def raw_sql_same_work(threads: int, user_id: int) -> float:
    def worker(i: int) -> int:
        me = f"raw2-{i}"
        count = 0
        with psycopg.connect(BENCH_DB_URL, autocommit=True) as conn:
            while True:
                row = conn.execute(RAW_CLAIM, (["learning_state_analysis"], me)).fetchone()
                if row is None:
                    return count
                job_id, attempt = row
                conn.execute(RAW_HEARTBEAT, (job_id, me)).fetchone()
                with conn.transaction():
                    conn.execute(RAW_SUCCEED, (job_id, me, attempt)).fetchone()
                    conn.execute(
                        RAW_RESULT, (uuid.uuid4().hex, job_id, attempt, f"{job_id}:{attempt}:h", json.dumps(OUTPUT), me)
                    )
                    conn.execute(RAW_ANALYSIS, (uuid.uuid4().hex, user_id, job_id, str(user_id)))
                    conn.execute(RAW_NOTICE, (uuid.uuid4().hex, user_id, job_id, str(user_id)))
                    conn.execute(RAW_USAGE, (user_id, count % 16, count % 16)).fetchone()
                count += 1

    return run_threads(threads, worker)


def raw_sql_lifecycle(threads: int) -> float:
    def worker(i: int) -> int:
        me = f"raw-{i}"
        count = 0
        # The fewest round trips the lifecycle can take: claim and heartbeat are one
        # statement each in autocommit, the result two statements in one transaction.
        with psycopg.connect(BENCH_DB_URL, autocommit=True) as conn:
            while True:
                row = conn.execute(RAW_CLAIM, (["learning_state_analysis"], me)).fetchone()
                if row is None:
                    return count
                job_id, attempt = row
                conn.execute(RAW_HEARTBEAT, (job_id, me)).fetchone()
                with conn.transaction():
                    conn.execute(RAW_SUCCEED, (job_id, me, attempt)).fetchone()
                    conn.execute(
                        RAW_RESULT, (uuid.uuid4().hex, job_id, attempt, f"{job_id}:{attempt}:h", json.dumps(OUTPUT), me)
                    )
                count += 1

    return run_threads(threads, worker)


# --- 2. services ---------------------------------------------------------------------------------


def service_lifecycle(threads: int) -> float:
    from decimal import Decimal

    from django.db import connection

    from ai_jobs import services

    def worker(i: int) -> int:
        me = f"svc-{i}"
        count = 0
        try:
            while True:
                jobs = services.job_claim(job_types=["learning_state_analysis"], limit=1, instance_id=me)
                if not jobs:
                    return count
                job = jobs[0]
                services.job_heartbeat(job_id=job.id, instance_id=me)
                services.result_submit(
                    job_id=job.id, instance_id=me, attempt_no=job.attempt_no, output_schema_version="v1",
                    output=OUTPUT, usage={"promptTokens": 10, "completionTokens": 10}, cost_cents=Decimal("0.01"),
                )  # fmt: skip
                count += 1
        finally:
            connection.close()

    return run_threads(threads, worker)


# --- 3. HTTP ---------------------------------------------------------------------------------------


def http_lifecycle(base_url: str, threads: int) -> float:
    def worker(i: int) -> int:
        me = f"http-{i}"
        session = requests.Session()
        session.headers.update({"Authorization": f"Bearer {RUNTIME_TOKEN}", "x-runtime-instance-id": me})
        api = f"{base_url}/internal/runtime/jobs"
        count = 0
        while True:
            response = session.post(f"{api}/claim", json={"capabilities": ["learning_state_analysis"], "limit": 1})
            response.raise_for_status()
            jobs = response.json()["jobs"]
            if not jobs:
                return count
            job = jobs[0]
            session.post(f"{api}/{job['jobId']}/heartbeat", json={}).raise_for_status()
            body = {
                "attemptNo": job["attemptNo"],
                "output": OUTPUT,
                "usage": {"promptTokens": 10, "completionTokens": 10},
            }
            session.post(f"{api}/{job['jobId']}/result", json=body).raise_for_status()
            count += 1

    return run_threads(threads, worker)


# --- 4. claim latency ----------------------------------------------------------------------------------


def claim_latency_ms(samples: int, *, include: bool = False) -> tuple[float, float]:
    """Median and p95 of one claim of 10; ``include``: the fast path (snapshot and
    credential with each job, the snapshots already stored)."""
    from django.db import connection

    from ai_jobs import services

    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        if include:
            services.job_claim_started(
                job_types=["learning_state_analysis"], limit=10, instance_id="latency", snapshot=True, credential=True
            )
        else:
            services.job_claim(job_types=["learning_state_analysis"], limit=10, instance_id="latency")
        timings.append((time.perf_counter() - started) * 1000)
    connection.close()
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.95)]


# --- 5. the read path: server CPU per request -------------------------------------------------


def learning_data(user: object) -> None:
    """A learner with something to snapshot: a knowledge base of 20 points and 5
    materials, 200 attempts over 40 days."""
    import datetime as dt

    from django.utils import timezone

    from learning.models import KnowledgeBase, KnowledgePoint, Material, StudyRecord

    base = KnowledgeBase.objects.create(user=user, name="Algebra", description="Equations and more. " * 20)
    points = [
        KnowledgePoint.objects.create(user=user, knowledge_base=base, name=f"Point {i}", description="About it. " * 10)
        for i in range(20)
    ]
    for i in range(5):
        Material.objects.create(user=user, knowledge_base=base, title=f"Chapter {i}", content="Text of it. " * 500)
    now = timezone.now()
    StudyRecord.objects.bulk_create(
        StudyRecord(
            user=user,
            knowledge_point=points[i % 20],
            is_correct=i % 3 != 0,
            score=50 + i % 50,
            duration_seconds=60 + i,
            studied_at=now - dt.timedelta(hours=5 * i),
        )
        for i in range(200)
    )


def read_path_cpu(conn: psycopg.Connection, user_id: int, target_id: str, count: int) -> list[tuple[str, float, str]]:
    """Server CPU (gunicorn, one worker, one thread, one client) per request of the
    read path, against a heartbeat of the same run (the framework's floor)."""
    started: list = []
    rows: list[tuple[str, float, str]] = []
    # A long lease: a slow machine must not see a job lapse between the phases.
    with gunicorn(workers=1, threads=1, started=started, extra_env={"AI_JOB_LOCK_SECONDS": "3600"}) as url:
        session = requests.Session()
        session.headers.update({"Authorization": f"Bearer {RUNTIME_TOKEN}", "x-runtime-instance-id": "cpu"})
        api = f"{url}/internal/runtime/jobs"

        def measure(name: str, calls: list[Callable[[], requests.Response]]) -> None:
            before = cpu_seconds(started[0].pid)
            for call in calls:
                call().raise_for_status()
            rows.append((name, (cpu_seconds(started[0].pid) - before) * 1000 / len(calls), "ms CPU"))

        def claim_all(body: dict) -> list[dict]:
            jobs: list[dict] = []
            while len(jobs) < count:
                answer = session.post(f"{api}/claim", json={"capabilities": ["learning_state_analysis"], **body})
                jobs += answer.json()["jobs"]
            return jobs

        conn.execute("TRUNCATE ai_runtime_result, ai_runtime_job, ai_job_snapshot CASCADE")
        insert_pending(conn, user_id, count, "job_cpu_", target_id)
        session.post(f"{api}/poll", json={"capabilities": ["learning_state_analysis"]}).raise_for_status()  # warm
        ids = [job["jobId"] for job in claim_all({"limit": 50})]
        measure(
            "POST heartbeat (the framework floor)",
            [lambda i=i: session.post(f"{api}/{i}/heartbeat", json={}) for i in ids],
        )
        measure("GET snapshot, missing: built", [lambda i=i: session.get(f"{api}/{i}/snapshot") for i in ids])
        measure("GET snapshot, stored", [lambda i=i: session.get(f"{api}/{i}/snapshot") for i in ids])
        measure("POST credential", [lambda i=i: session.post(f"{api}/{i}/credential", json={}) for i in ids])

        # A job's whole read path: the separate calls, then the fast path (snapshots built on the way).
        conn.execute("TRUNCATE ai_runtime_result, ai_runtime_job, ai_job_snapshot CASCADE")
        insert_pending(conn, user_id, count, "job_cps_", target_id)
        body = {"capabilities": ["learning_state_analysis"], "limit": 1}

        def separate() -> requests.Response:
            [job] = session.post(f"{api}/claim", json=body).json()["jobs"]
            session.post(f"{api}/{job['jobId']}/heartbeat", json={}).raise_for_status()
            session.get(f"{api}/{job['jobId']}/snapshot").raise_for_status()
            return session.post(f"{api}/{job['jobId']}/credential", json={})

        measure("per job: claim, heartbeat, snapshot, credential", [separate] * count)
        conn.execute("TRUNCATE ai_runtime_result, ai_runtime_job, ai_job_snapshot CASCADE")
        insert_pending(conn, user_id, count, "job_cpf_", target_id)
        fast = {**body, "include": ["snapshot", "credential"]}
        probe = session.post(f"{api}/claim", json=fast).json()["jobs"]
        if probe and "snapshot" in probe[0]:
            measure("per job: claim with include", [lambda: session.post(f"{api}/claim", json=fast)] * (count - 1))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--server-threads", type=int, default=4, help="gunicorn threads per worker")
    parser.add_argument("--big", type=int, default=1_000_000, help="rows for the large-table claim latency")
    parser.add_argument("--read-requests", type=int, default=300, help="requests per kind for the read path's CPU")
    parser.add_argument("--only-read-path", action="store_true", help="just the read path's CPU per request")
    args = parser.parse_args()

    # Production-like broker settings (the notice is a row of the result's transaction, no message).
    os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/9")
    # The in-process claims with include resolve the platform key, as gunicorn's do.
    os.environ.setdefault("PLATFORM_DEEPSEEK_API_KEY", "sk-bench")
    fresh_database()
    setup_django()
    from django.contrib.auth import get_user_model

    from accounts.selectors import public_id_of
    from quotas.models import UserAiSettings

    user = get_user_model().objects.create_user("bench")
    UserAiSettings.objects.create(user=user, ai_analysis_enabled=True)  # the learner's consent
    conn = psycopg.connect(BENCH_DB_URL)
    conn.autocommit = True
    learning_data(user)
    read_rows = read_path_cpu(conn, user.pk, public_id_of(user), args.read_requests)
    report(
        f"The read path, server CPU per request ({args.read_requests} each, gunicorn 1x1, one client)",
        read_rows,
        "POST heartbeat (the framework floor)",
    )
    if args.only_read_path:
        return

    def reset() -> None:
        conn.execute(
            # Outputs name their job by a plain job_id (retention): the jobs' CASCADE no longer empties them.
            "TRUNCATE ai_runtime_result, ai_runtime_job, ai_learning_analysis, ai_notification, quota_user_ai_usage, "
            "quota_platform_daily_usage CASCADE"
        )
        insert_pending(conn, user.pk, args.jobs, "job_bench_", public_id_of(user))
        conn.execute("VACUUM ANALYZE ai_runtime_job")

    conn.autocommit = True
    rows = []
    reset()
    rows.append(("raw SQL via psycopg (floor)", raw_sql_lifecycle(args.threads), "jobs/s"))
    reset()
    rows.append(("raw SQL, the service's statements", raw_sql_same_work(args.threads, user.pk), "jobs/s"))
    reset()
    rows.append(("service layer, in-process", service_lifecycle(args.threads), "jobs/s"))
    reset()
    started: list = []
    with gunicorn(
        workers=args.workers,
        threads=args.server_threads,
        extra_env={"CELERY_BROKER_URL": os.environ["CELERY_BROKER_URL"]},
        started=started,
    ) as url:
        requests.post(
            f"{url}/internal/runtime/jobs/poll",
            json={"capabilities": ["learning_state_analysis"]},
            headers={"Authorization": f"Bearer {RUNTIME_TOKEN}"},
        )
        machine, client, web = machine_cpu_seconds(), os.times(), cpu_seconds(started[0].pid)
        rows.append(
            (
                f"HTTP API via gunicorn {args.workers}x{args.server_threads}, {args.threads} runtime threads",
                http_lifecycle(url, args.threads),
                "jobs/s",
            )
        )
        after = os.times()
        split = [
            ("the machine, all processes", machine_cpu_seconds() - machine, "ms CPU"),
            ("gunicorn (its workers)", cpu_seconds(started[0].pid) - web, "ms CPU"),
            ("this benchmark's HTTP client", after.user + after.system - client.user - client.system, "ms CPU"),
        ]
    split.append(("the rest: PostgreSQL, Redis, the kernel", split[0][1] - split[1][1] - split[2][1], "ms CPU"))
    title = f"Lifecycle claim + heartbeat + result, {args.jobs} jobs, {args.threads} threads"
    report(title + ": against the transitions alone", rows, "raw SQL via psycopg (floor)")
    report(title + ": against the same statements", rows, "raw SQL, the service's statements")
    report(
        "Where a job's CPU goes over HTTP (per job)",
        [(name, 1000 * seconds / args.jobs, unit) for name, seconds, unit in split],
        "the machine, all processes",
    )

    from ai_jobs.snapshots import snapshot_create

    latency, fast = [], []
    for size in (10_000, args.big):
        conn.execute("TRUNCATE ai_runtime_result, ai_runtime_job, ai_job_snapshot CASCADE")
        # Every job names one stored snapshot: the fast path's latency is the claim and its reads, not building.
        snapshot = snapshot_create(user=user, target_type="user", target_id=public_id_of(user))
        insert_pending(conn, user.pk, size, "job_lat_", public_id_of(user), snapshot.id)
        conn.execute("VACUUM ANALYZE ai_runtime_job")
        median, p95 = claim_latency_ms(200)
        latency.append((f"claim of 10 with {size:,} pending rows (median)", median, "ms"))
        latency.append((f"claim of 10 with {size:,} pending rows (p95)", p95, "ms"))
        median, p95 = claim_latency_ms(200, include=True)
        fast.append((f"claim of 10 with include, {size:,} pending (median)", median, "ms"))
        fast.append((f"claim of 10 with include, {size:,} pending (p95)", p95, "ms"))
    report("Claim latency", latency, "claim of 10 with 10,000 pending rows (median)")
    report("Claim latency, fast path", fast, "claim of 10 with include, 10,000 pending (median)")
    conn.close()


if __name__ == "__main__":
    main()
