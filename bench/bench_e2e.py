"""End-to-end jobs per second of the reference runtime, against the raw-SQL floor.

    .venv/bin/python bench/bench_e2e.py [--jobs 1000] [--concurrency 8]

End to end: gunicorn serving the project on PostgreSQL, the stand-in model
answering at once (its own process), two runtimes (``manage.py run_runtime``,
``--concurrency`` slots each). The jobs are inserted in one statement once
everything is up and idle; the clock stops when the last one is ``succeeded``.
Every job makes the full trip: claim, first heartbeat, snapshot (built by the
server), credential, prompt, model call, schema check, result (stored with its
records, usage and cost), invocation log.

The floor, in the same run and on the same database: the lifecycle's three
writes done straight through psycopg by ``2 x --concurrency`` threads (one per
runtime slot): claim (``UPDATE ... RETURNING`` over ``FOR UPDATE SKIP
LOCKED``), heartbeat (``UPDATE``), result (``INSERT`` + ``UPDATE`` in one
transaction). No HTTP, no snapshot, no model, no validation: what the database
alone allows.

The production shape: Redis for the cache and the throttles
(``BENCH_E2E_REDIS_URL``, default ``redis://127.0.0.1:6379/14``), a Celery worker
(``--pool threads``, as its systemd unit runs it) and beat on a Redis broker
(``BENCH_E2E_BROKER_URL``, default ``redis://127.0.0.1:6379/15``); both are flushed
before the run.

Where the time goes, per job: CPU of gunicorn (its workers), each runtime, the
Celery worker, beat, the stand-in, and the PostgreSQL backends serving the run
(client backends of the bench database, read from ``/proc`` while it runs; the
bench's own connections are left out). Connections: every process names itself
(``PGAPPNAME``); the sessions PostgreSQL opened during the run
(``pg_stat_database.sessions``, exact) and, per process, the backends seen
(sampled every 50 ms, so a lower bound for connections shorter than that).

The database is ``BENCH_E2E_DATABASE_URL`` (default
``postgres://postgres@127.0.0.1:5432/aijobs_bench_e2e``), created and migrated if
missing; its job tables are emptied before each phase.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._common import BackendSampler, cpu_seconds, free_port, run_threads  # noqa: E402  (run as a script)
from bench.lifecycle_sql import FLOOR_CLAIM, FLOOR_HEARTBEAT, FLOOR_RESULT, FLOOR_SUCCEED  # noqa: E402

DATABASE_URL = os.environ.get("BENCH_E2E_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aijobs_bench_e2e")
REDIS_URL = os.environ.get("BENCH_E2E_REDIS_URL", "redis://127.0.0.1:6379/14")
BROKER_URL = os.environ.get("BENCH_E2E_BROKER_URL", "redis://127.0.0.1:6379/15")
TOKEN = "bench-runtime-token-0123456789abcdef"  # 32 or more: gunicorn refuses less
JOB_TYPES = [
    "learning_state_analysis",
    "weak_point_analysis",
    "next_action_planning",
    "quiz_generation",
    "flashcard_generation",
]


def ensure_database() -> None:
    import psycopg

    url = urlparse(DATABASE_URL)
    name = url.path.lstrip("/")
    admin = url._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    env = {**os.environ, "DATABASE_URL": DATABASE_URL}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--run-syncdb", "--noinput", "-v0"], cwd=ROOT, env=env, check=True
    )


def setup_django() -> None:
    os.environ["DATABASE_URL"] = DATABASE_URL
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("CELERY_BROKER_URL", "memory://")
    import django

    django.setup()


def empty_job_tables() -> None:
    from django.db import connection

    from ai_jobs.models import AiInvocationLog, AiJobSnapshot, AiRuntimeJob, AiRuntimeResult
    from quotas.models import PlatformCircuitBreaker, PlatformDailyUsage, UserAiUsage

    # The day's usage too: runs add up, and a day's platform budget used up by earlier
    # runs would open the breaker and hand out nothing.
    models = (AiInvocationLog, AiRuntimeResult, AiJobSnapshot, AiRuntimeJob, UserAiUsage, PlatformDailyUsage)
    tables = [m._meta.db_table for m in (*models, PlatformCircuitBreaker)]
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} CASCADE")


def create_jobs(count: int, *, mixed: bool) -> None:
    """``count`` pending jobs in one INSERT; mixed: the five job types in turn."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from accounts.selectors import public_id_of
    from ai_jobs.models import AiRuntimeJob
    from quotas.models import UserAiSettings

    user, _ = get_user_model().objects.get_or_create(username="bench-learner")
    UserAiSettings.objects.update_or_create(user=user, defaults={"ai_analysis_enabled": True})  # the learner's consent
    kb_id = "kb_bench"
    try:
        from learning.models import KnowledgeBase

        kb_id = KnowledgeBase.objects.get_or_create(user=user, name="Bench knowledge base")[0].id
    except ImportError:
        pass
    today = timezone.localdate()  # the learner's timezone is UTC
    jobs = []
    for index in range(count):
        job_type = JOB_TYPES[index % len(JOB_TYPES)] if mixed else JOB_TYPES[0]
        kb_target = job_type in ("quiz_generation", "flashcard_generation")
        jobs.append(
            AiRuntimeJob(
                user=user,
                job_type=job_type,
                target_type="knowledge_base" if kb_target else "user",
                target_id=kb_id if kb_target else public_id_of(user),
                params={"questionCount": 5, "cardCount": 5} if kb_target else {},
                quota_date=today,  # the user's day, as POST /ai/jobs sets it
            )
        )
    AiRuntimeJob.objects.bulk_create(jobs, batch_size=1000)


def count_by_status() -> dict[str, int]:
    from django.db.models import Count

    from ai_jobs.models import AiRuntimeJob

    return dict(AiRuntimeJob.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n"))


def unfinished() -> int:
    """Jobs not yet final: one indexed count, cheap enough to ask often."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM ai_runtime_job WHERE status IN ('pending', 'locked', 'running', 'expired')"
        )
        return cursor.fetchone()[0]


# --- the floor ---------------------------------------------------------------------------------------


def floor(count: int, threads: int) -> float:
    import psycopg

    from ai_jobs import output_schemas
    from config.ids import new_id

    empty_job_tables()
    create_jobs(count, mixed=False)
    output = {
        "summary": "bench",
        "masteryScore": 50.0,
        "level": "developing",
        "strengths": [],
        "weaknesses": [],
        "confidence": 0.5,
    }
    output_json = json.dumps(output)
    digest = output_schemas.output_hash(output)

    def slot(index: int) -> int:
        instance, done = f"floor-{index}", 0
        with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
            while True:
                row = conn.execute(FLOOR_CLAIM, [[JOB_TYPES[0]], instance]).fetchone()
                if row is None:
                    return done
                job_id, attempt = row
                conn.execute(FLOOR_HEARTBEAT, [job_id, instance]).fetchone()
                with conn.transaction():
                    if conn.execute(FLOOR_SUCCEED, [job_id, instance, attempt]).fetchone():
                        key = f"{job_id}:{attempt}:{digest}"
                        conn.execute(FLOOR_RESULT, [new_id("res"), job_id, attempt, key, digest, output_json, instance])
                        done += 1

    rate = run_threads(threads, slot)
    finished = count_by_status().get("succeeded", 0)
    assert finished == count, f"floor finished {finished} of {count}"
    return rate


# --- end to end ----------------------------------------------------------------------------------------


def flush_redis() -> None:
    import redis

    for url in (REDIS_URL, BROKER_URL):
        redis.Redis.from_url(url).flushdb()


def wait_http(url: str, timeout: float = 60) -> None:
    import requests

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            requests.post(
                f"{url}/internal/runtime/jobs/poll",
                json={"capabilities": JOB_TYPES[:1]},
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=2,
            ).raise_for_status()
            return
        except Exception:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not come up")


@dataclass
class Run:
    rate: float
    cpu_ms: dict[str, float]  # per job, by process (and "postgres backends")
    sessions_opened: int
    opened: dict[str, int]  # backends each process opened during the run (sampled)
    seen: dict[str, int]  # backends each process had at any time during the run (sampled)


def end_to_end(
    count: int, concurrency: int, gunicorn_workers: int, gunicorn_threads: int, logs: Path, extra_env: dict[str, str]
) -> Run:
    empty_job_tables()
    flush_redis()
    standin_port, web_port = free_port(), free_port()
    api_url = f"http://127.0.0.1:{web_port}"
    env = {
        **os.environ,
        **extra_env,
        "DATABASE_URL": DATABASE_URL,
        "REDIS_URL": REDIS_URL,
        "CELERY_BROKER_URL": BROKER_URL,
        "RUNTIME_SERVICE_TOKENS": TOKEN,
        "RUNTIME_THROTTLE_RATE": "100000000/min",
        "PLATFORM_DEEPSEEK_API_KEY": "sk-bench-placeholder",
        "DEEPSEEK_BASE_URL": f"http://127.0.0.1:{standin_port}",
        "LOG_LEVEL": "WARNING",
    }
    processes: list[subprocess.Popen[bytes]] = []
    names: list[str] = []

    def spawn(name: str, args: list[str], extra: dict[str, str] | None = None) -> None:
        out = (logs / f"{name}.log").open("wb")
        processes.append(
            subprocess.Popen(
                args, cwd=ROOT, env={**env, "PGAPPNAME": name, **(extra or {})}, stdout=out, stderr=subprocess.STDOUT
            )
        )
        names.append(name)

    try:
        spawn("standin", [sys.executable, "manage.py", "run_standin_model", "--port", str(standin_port)])
        spawn(
            "gunicorn",
            [
                *(sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{web_port}"),
                *("--workers", str(gunicorn_workers), "--threads", str(gunicorn_threads), "--log-level", "warning"),
            ],
        )
        spawn(
            "celery-worker",
            [*(sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "threads", "--concurrency", "4"),
             *("--loglevel", "WARNING", "-n", f"bench-e2e-{web_port}@%h")],
        )  # fmt: skip
        spawn(
            "celery-beat",
            [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "WARNING",
             "-s", str(logs / "beat-schedule")],
        )  # fmt: skip
        wait_http(api_url)
        for name in ("bench-rt-a", "bench-rt-b"):
            spawn(
                name,
                [sys.executable, "manage.py", "run_runtime", "--grace-seconds", "5"],
                {
                    "RUNTIME_API_URL": api_url,
                    "RUNTIME_SERVICE_TOKEN": TOKEN,
                    "RUNTIME_INSTANCE_ID": name,
                    "RUNTIME_CONCURRENCY": str(concurrency),
                    "RUNTIME_POLL_INTERVAL_MS": "50",
                },
            )
        time.sleep(5)  # both runtimes up and polling an empty queue, the worker and beat started
        cpu_before = {name: cpu_seconds(p.pid) for name, p in zip(names, processes, strict=True)}
        with BackendSampler(DATABASE_URL) as backends:
            began = time.perf_counter()
            create_jobs(count, mixed=True)
            while unfinished():
                if any(p.poll() is not None for p in processes):
                    raise SystemExit(f"a process died; see {logs}")
                time.sleep(0.05)
            elapsed = time.perf_counter() - began
            cpu = {name: cpu_seconds(p.pid) - cpu_before[name] for name, p in zip(names, processes, strict=True)}
        cpu["postgres backends"] = backends.cpu()
        statuses = count_by_status()
        if statuses.get("succeeded", 0) != count:
            raise SystemExit(f"not every job succeeded: {statuses}; see {logs}")
        return Run(
            rate=count / elapsed,
            cpu_ms={name: 1000 * seconds / count for name, seconds in cpu.items()},
            sessions_opened=backends.sessions_opened,
            opened=backends.opened_by_process(),
            seen=backends.open_by_process(),
        )
    finally:
        for process in reversed(processes):
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8, help="slots per runtime (two runtimes)")
    parser.add_argument("--gunicorn-workers", type=int, default=2)
    parser.add_argument("--gunicorn-threads", type=int, default=8)
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for every process (e.g. DB_POOL=true)",
    )
    args = parser.parse_args()
    extra_env = dict(item.split("=", 1) for item in args.env)

    ensure_database()
    setup_django()
    logs = ROOT / "var" / f"bench-e2e-{uuid.uuid4().hex[:6]}"
    logs.mkdir(parents=True, exist_ok=True)
    floor_rate = floor(args.jobs, threads=2 * args.concurrency)
    run = end_to_end(args.jobs, args.concurrency, args.gunicorn_workers, args.gunicorn_threads, logs, extra_env)
    empty_job_tables()
    settings_note = f", {' '.join(args.env)}" if args.env else ""
    print(
        f"bench_e2e: {args.jobs} jobs, {os.cpu_count()} CPUs, PostgreSQL {urlparse(DATABASE_URL).path.lstrip('/')}, "
        f"Redis cache and throttles, Celery worker and beat on a Redis broker{settings_note}"
    )
    print(f"  raw-SQL lifecycle floor, psycopg, {2 * args.concurrency} threads:          {floor_rate:8.1f} jobs/s")
    print(
        f"  end to end, gunicorn {args.gunicorn_workers}x{args.gunicorn_threads}, 2 runtimes x {args.concurrency} slots, "
        f"stand-in: {run.rate:8.1f} jobs/s"
    )
    print(f"  ratio end-to-end / floor: {run.rate / floor_rate:.3f}   (logs: {logs.relative_to(ROOT)})")
    total = sum(run.cpu_ms.values())
    print(
        f"  CPU per end-to-end job: {total:.1f} ms: "
        + ", ".join(f"{name} {ms:.1f} ms" for name, ms in run.cpu_ms.items())
    )
    print(
        f"  database connections opened during the run: {run.sessions_opened} (pg_stat_database); "
        "by process, opened (of all it had): "
        + ", ".join(f"{name} {run.opened.get(name, 0)} ({run.seen[name]})" for name in sorted(run.seen))
    )


if __name__ == "__main__":
    main()
