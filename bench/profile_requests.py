"""Where a request's time goes: ``POST /ai/jobs`` and a runtime's claim, heartbeat and
result, each profiled in process through Django's WSGI handler (the whole stack
gunicorn calls: middleware, URL resolution, DRF, the service, the driver), with the
statements each request sends.

    .venv/bin/python -m bench.profile_requests [--requests 500] [--top 25] [--save DIR]

The production shape: PostgreSQL (``BENCH_DB``, default ``aijobs_bench_profile``,
created afresh), Redis for the cache and throttles (``BENCH_REDIS_URL``, default
database 13, emptied first), ``DEBUG`` false. ``--requests`` learners' jobs are created
through ``POST /ai/jobs``; then each job is claimed with ``include`` (snapshot and
credential: the reference runtime's fast path, one job a claim, each with its ``claimId``), heartbeats once and
sends its result with one invocation log. Each of the four is one profile
(``cProfile``) over all its requests, after a warm-up round.

For each, it prints the CPU per request, the statements per request (by their first
words), the share of the request's time spent in each layer (own time of the
functions of each package: Django, DRF, psycopg, redis, the project's apps, ...), and the
functions with the largest cumulative share. ``--save DIR`` also writes each profile
(``pstats``) for a closer look (``python -m pstats``, snakeviz).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("BENCH_DB", "aijobs_bench_profile")

from bench._common import RUNTIME_TOKEN, fresh_database

OUTPUT = {
    "summary": "Steady progress.",
    "masteryScore": 72.5,
    "level": "proficient",
    "strengths": ["linear equations"],
    "weaknesses": ["fractions"],
    "confidence": 0.8,
}
INSTANCE = "rt-profile"

# Own time of the functions under each path, by the first fragment found in the file name.
LAYERS = [
    ("/django/db/", "Django ORM and db layer"),
    ("/django/", "Django (handler, middleware, URLs, HTTP)"),
    ("/rest_framework_simplejwt/", "simplejwt"),
    ("/jwt/", "PyJWT"),
    ("/rest_framework/", "DRF"),
    ("/psycopg/", "psycopg"),
    ("/psycopg_binary/", "psycopg"),
    ("/redis/", "redis client"),
    ("/django_redis/", "redis client"),
    ("/prometheus_client/", "prometheus_client"),
    ("/csp/", "django-csp"),
    ("/axes/", "django-axes"),
    ("/whitenoise/", "whitenoise"),
    ("/jsonschema", "jsonschema"),
    ("/logging/", "logging"),
    ("/json/", "json"),
]
PROJECT = ["config", "accounts", "ai_jobs", "quotas", "credentials", "learning", "asynch", "ops"]


def layer_of(filename: str, function: str) -> str:
    if filename == "~":  # a C function: named by what it is
        if "socket" in function or "recv" in function or "send" in function or "select" in function:
            return "socket I/O (C)"
        if "psycopg" in function or "pq" in function:
            return "psycopg"
        return "other C built-ins"
    for app in PROJECT:
        if f"/{app}/" in filename and "site-packages" not in filename:
            return f"project: {app}"
    for fragment, name in LAYERS:
        if fragment in filename:
            return name
    return "other Python (stdlib, libraries)"


def wsgi_caller(application: Any = None) -> Callable[..., tuple[int, bytes]]:
    if application is None:
        from config.wsgi import application

    def call(method: str, path: str, body: object | None = None, headers: dict[str, str] | None = None):
        data = json.dumps(body).encode() if body is not None else b""
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(data)),
            "wsgi.input": io.BytesIO(data),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            "wsgi.version": (1, 0),
        }
        for name, value in (headers or {}).items():
            environ["HTTP_" + name.upper().replace("-", "_")] = value
        status: list[str] = []
        chunks = application(environ, lambda s, h, exc_info=None: status.append(s))
        content = b"".join(chunks)
        if hasattr(chunks, "close"):
            chunks.close()
        return int(status[0].split()[0]), content

    return call


class Statements:
    """Every statement the requests send, by its first words."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()
        self.count = 0

    def __call__(self, execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        self.count += 1
        words = " ".join(str(sql).split()[:4])
        self.kinds[words[:60]] += 1
        return execute(sql, params, many, context)


def plain(name: str, requests: list[Callable[[], None]]) -> None:
    """CPU per request without the profiler (``--plain``): to compare two trees."""
    cpu = time.process_time()
    for request in requests:
        request()
    print(f"  {name:<52} {1000 * (time.process_time() - cpu) / len(requests):6.3f} ms CPU a request", flush=True)


def profiled(name: str, requests: list[Callable[[], None]], top: int, save: Path | None) -> None:
    from django.db import connection

    statements = Statements()
    profile = cProfile.Profile(time.thread_time)  # CPU, not waits: what a request costs the process
    with connection.execute_wrapper(statements):
        cpu, wall = time.process_time(), time.perf_counter()
        profile.enable()
        for request in requests:
            request()
        profile.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    n = len(requests)
    stats = pstats.Stats(profile)
    if save:
        stats.dump_stats(str(save / f"{name.replace('/', '_').replace(' ', '_')}.pstats"))
    total = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
    layers: Counter[str] = Counter()
    for (filename, _line, function), (_cc, _nc, own, _cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        layers[layer_of(filename, function)] += own
    print(f"\n=== {name}: {n} requests, {1000 * cpu / n:.2f} ms CPU and {1000 * wall / n:.2f} ms wall a request "
          f"(profiled: the profiler adds to both), {statements.count / n:.1f} statements a request")  # fmt: skip
    for kind, count in statements.kinds.most_common():
        print(f"    {count / n:5.2f} x  {kind}")
    print("  own time by layer (share of the request):")
    for layer, own in layers.most_common():
        print(f"    {100 * own / total:5.1f}%  {layer}")
    print(f"  cumulative share, the top {top} functions (below the WSGI handler):")
    rows = []
    for (filename, line, function), (_cc, calls, _own, cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        short = filename.split("site-packages/")[-1].replace(str(Path.cwd()) + "/", "")
        rows.append((cum, calls, f"{short}:{line}({function})"))
    rows.sort(reverse=True)
    for cum, calls, where in rows[: top + 8]:
        if cum / total > 0.995:
            continue  # the handler's own frames: the whole request
        print(f"    {100 * cum / total:5.1f}%  {calls / n:5.1f}/req  {where}")


def chains(rounds: int, count: int, claim: Callable[[], None], jobs: list[dict[str, Any]], runtime: dict) -> None:
    """Heartbeats through Django's own WSGI handler (every request through the whole
    ``MIDDLEWARE``) and through the project's (``config.handlers``: the APIs' chain),
    alternated in one process, ``count`` a turn: the middleware's cost on an API request."""
    from django.core.handlers.wsgi import WSGIHandler

    from ai_jobs.models import AiRuntimeJob
    from config.wsgi import application

    for _ in range(min(count, 50)):
        claim()
    # A loaded machine's rounds may outlast the jobs' timeoutSeconds: no deadline here.
    AiRuntimeJob.objects.filter(status="running").update(deadline_ms=None)
    callers = {
        "Django's handler, whole chain": wsgi_caller(WSGIHandler()),
        "project's handler": wsgi_caller(application),
    }
    spent: dict[str, list[float]] = {name: [] for name in callers}
    for round_no in range(rounds):
        for name in callers if round_no % 2 == 0 else reversed(list(callers)):
            call = callers[name]
            cpu = time.process_time()
            for i in range(count):
                status, _ = call(
                    "POST", f"/internal/runtime/jobs/{jobs[i % len(jobs)]['jobId']}/heartbeat", {}, runtime
                )
                assert status == 200, (status, _)
            spent[name].append(1000 * (time.process_time() - cpu) / count)
    print(f"heartbeat, ms CPU a request, {rounds} rounds of {count} alternated:")
    for name, values in spent.items():
        print(f"  {name:<32} {', '.join(f'{v:.3f}' for v in values)}; median {statistics.median(values):.3f}")
    ratios = [p / d for d, p in zip(*spent.values(), strict=True)]
    print(f"  project / Django, per round: {min(ratios):.3f}-{max(ratios):.3f}, median {statistics.median(ratios):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--save", type=Path)
    parser.add_argument("--plain", action="store_true", help="CPU per request only, without the profiler")
    parser.add_argument(
        "--chains",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="only heartbeats, alternated between Django's WSGI handler and the project's, ROUNDS rounds",
    )
    args = parser.parse_args()
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)

    fresh_database()
    os.environ["REDIS_URL"] = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
    os.environ.update(
        {
            "RUNTIME_SERVICE_TOKENS": RUNTIME_TOKEN,
            "RUNTIME_THROTTLE_RATE": "100000000/min",
            "USER_THROTTLE_RATE": "100000000/min",
            "PLATFORM_DEEPSEEK_API_KEY": "sk-bench",
            "LOG_LEVEL": "WARNING",
            "CELERY_BROKER_URL": "memory://",
            "AI_JOB_LOCK_SECONDS": "3600",  # a slow machine's profiled run outlasts no lease
        }
    )
    import redis

    redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()
    from bench._common import setup_django

    setup_django()
    from django.contrib.auth import get_user_model

    from accounts.api.tokens import RefreshToken
    from quotas.models import UserAiSettings

    call = wsgi_caller()
    count = args.requests
    users = [get_user_model().objects.create_user(f"profile{i}") for i in range(8)]
    for user in users:
        UserAiSettings.objects.create(
            user=user, ai_analysis_enabled=True, max_daily_ai_jobs=10**6, max_daily_token_budget=10**9
        )
    tokens = [str(RefreshToken.for_user(user).access_token) for user in users]
    runtime = {"Authorization": f"Bearer {RUNTIME_TOKEN}", "x-runtime-instance-id": INSTANCE}
    body = {"jobType": "learning_state_analysis", "targetType": "user", "targetId": "me"}
    jobs: list[dict[str, Any]] = []

    def create(i: int) -> Callable[[], None]:
        def run() -> None:
            status, _ = call("POST", "/ai/jobs", body, {"Authorization": f"Bearer {tokens[i % len(tokens)]}"})
            assert status == 201, status

        return run

    def claim() -> None:
        status, content = call(
            "POST",
            "/internal/runtime/jobs/claim",
            # A claimId of its own, as the reference runtime sends with each claim.
            {
                "capabilities": ["learning_state_analysis"],
                "limit": 1,
                "include": ["snapshot", "credential"],
                "claimId": uuid.uuid4().hex,
            },
            runtime,
        )
        assert status == 200, (status, content[:300])
        jobs.extend(json.loads(content)["jobs"])

    def heartbeat(i: int) -> Callable[[], None]:
        def run() -> None:
            status, content = call("POST", f"/internal/runtime/jobs/{jobs[i]['jobId']}/heartbeat", {}, runtime)
            assert status == 200, (status, content[:300])

        return run

    def result(i: int) -> Callable[[], None]:
        job = jobs[i]

        def run() -> None:
            log = {
                "attemptNo": job["attemptNo"], "provider": "deepseek", "modelName": "deepseek-chat",
                "requestId": f"req-{i}", "startedAt": "2026-12-07T10:00:00Z", "latencyMs": 120, "httpStatus": 200,
                "promptTokens": 10, "completionTokens": 10, "totalTokens": 20, "costCents": 0.01, "errorCode": None,
            }  # fmt: skip
            payload = {
                "attemptNo": job["attemptNo"],
                "outputSchemaVersion": "v1",
                "output": OUTPUT,
                "usage": {"promptTokens": 10, "completionTokens": 10, "totalTokens": 20},
                "costCents": 0.01,
                "invocationLogs": [log],
            }
            status, content = call("POST", f"/internal/runtime/jobs/{job['jobId']}/result", payload, runtime)
            assert status == 200, (status, content[:300])

        return run

    warm = 20
    for i in range(warm):  # connections, prepared statements, caches: what a serving process has
        create(i)()
    for _ in range(warm):
        claim()
    for i in range(warm):
        heartbeat(i)()
    for i in range(warm):
        result(i)()
    jobs.clear()

    if args.chains:
        for i in range(50):
            create(i)()
        chains(args.chains, count, claim, jobs, runtime)
        return
    print(f"profile_requests: {count} requests each, in process through the WSGI handler, PostgreSQL and Redis")

    def measure(name: str, requests: list[Callable[[], None]]) -> None:
        if args.plain:
            plain(name, requests)
        else:
            profiled(name, requests, args.top, args.save)

    measure("POST /ai/jobs", [create(i) for i in range(count)])
    measure("claim (limit 1, include snapshot and credential)", [claim] * count)
    assert len(jobs) == count, len(jobs)
    measure("heartbeat", [heartbeat(i) for i in range(count)])
    measure("result (with one invocation log)", [result(i) for i in range(count)])


if __name__ == "__main__":
    sys.exit(main())
