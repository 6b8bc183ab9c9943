"""``POST /ai/jobs`` per second through gunicorn — the contract's eleven steps
(target check, settings, idempotency, quota, breaker and budget, snapshot, the job
and the day's count in one transaction) — against a bare DRF view with the same
JWT authentication doing one INSERT, in the same run.

    .venv/bin/python -m bench.bench_create [--requests 1500] [--threads 4]
"""

from __future__ import annotations

import argparse
import threading
import time

import requests

from bench._common import fresh_database, gunicorn, report, setup_django


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

    rows = []
    with gunicorn(workers=2, threads=4, extra_env={"DJANGO_SETTINGS_MODULE": "bench.settings"}) as base:
        hammer(f"{base}/bench/bare-insert", tokens, 20, job_body)  # warm up both paths
        hammer(f"{base}/ai/jobs", tokens, 20, job_body)
        rows.append(
            ("bare DRF view, one INSERT", hammer(f"{base}/bench/bare-insert", tokens, per_thread, job_body), "req/s")
        )
        rows.append(("POST /ai/jobs (eleven steps)", hammer(f"{base}/ai/jobs", tokens, per_thread, job_body), "req/s"))
    report(f"Job creation through gunicorn, {args.threads} client threads", rows, "bare DRF view, one INSERT")


if __name__ == "__main__":
    main()
