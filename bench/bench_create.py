"""``POST /ai/jobs`` per second through gunicorn — the eleven steps of a job's creation
(target check, settings, idempotency, quota, breaker and budget, snapshot, the job
and the day's count in one transaction) — against a bare DRF view with the same
JWT authentication doing one INSERT, in the same run.

    .venv/bin/python -m bench.bench_create [--requests 1500] [--threads 4]

Beside the rates, each one's CPU per request: gunicorn's (its workers) and the
PostgreSQL backends' serving it (``bench._common.BackendSampler``): on a machine
shared with other work the rate moves with the load, the CPU a request costs much less.
"""

from __future__ import annotations

import argparse
import subprocess
import threading
import time

import requests

from bench._common import (
    BENCH_DB_URL,
    BackendSampler,
    cpu_seconds,
    fresh_database,
    gunicorn,
    report,
    setup_django,
)


def hammer(url: str, tokens: list[str], per_thread: int, body_of) -> float:
    barrier = threading.Barrier(len(tokens) + 1)
    failures: list[str] = []

    def worker(i: int) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {tokens[i]}"
        barrier.wait()
        for n in range(per_thread):
            response = session.post(url, json=body_of(i, n))
            if response.status_code not in (200, 201):
                failures.append(response.text[:200])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(tokens))]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    assert not failures, failures[:3]
    return len(tokens) * per_thread / elapsed


def measured(url: str, pid: int, tokens: list[str], per_thread: int, body_of) -> tuple[float, float, float]:
    """Requests/s, and gunicorn's (``pid``, with its workers) and the PostgreSQL backends'
    CPU ms per request."""
    before = cpu_seconds(pid)
    with BackendSampler(BENCH_DB_URL) as backends:
        rate = hammer(url, tokens, per_thread, body_of)
    web = cpu_seconds(pid) - before
    count = len(tokens) * per_thread
    return rate, 1000 * web / count, 1000 * backends.cpu() / count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    per_thread = args.requests // args.threads

    fresh_database()
    setup_django()
    from django.contrib.auth import get_user_model

    from accounts.api.tokens import RefreshToken
    from quotas.models import UserAiSettings

    users = [get_user_model().objects.create_user(f"bench{i}") for i in range(args.threads)]
    for user in users:
        UserAiSettings.objects.create(
            user=user, ai_analysis_enabled=True, max_daily_ai_jobs=10**6, max_daily_token_budget=10**9
        )
    tokens = [str(RefreshToken.for_user(user).access_token) for user in users]

    def job_body(i: int, n: int) -> dict[str, object]:
        return {"jobType": "learning_state_analysis", "targetType": "user", "targetId": "me"}

    rows, cpu_rows = [], []
    started: list[subprocess.Popen] = []
    with gunicorn(
        workers=2, threads=4, extra_env={"DJANGO_SETTINGS_MODULE": "bench.settings"}, started=started
    ) as base:
        hammer(f"{base}/bench/bare-insert", tokens, 20, job_body)  # warm up both paths
        hammer(f"{base}/ai/jobs", tokens, 20, job_body)
        for name, path in (
            ("bare DRF view, one INSERT", "/bench/bare-insert"),
            ("POST /ai/jobs (eleven steps)", "/ai/jobs"),
        ):
            rate, web_ms, database_ms = measured(f"{base}{path}", started[0].pid, tokens, per_thread, job_body)
            rows.append((name, rate, "req/s"))
            cpu_rows += [(f"{name}: gunicorn", web_ms, "ms"), (f"{name}: PostgreSQL", database_ms, "ms")]
    report(f"Job creation through gunicorn, {args.threads} client threads", rows, "bare DRF view, one INSERT")
    report("CPU per request", cpu_rows, "bare DRF view, one INSERT: gunicorn")


if __name__ == "__main__":
    main()
