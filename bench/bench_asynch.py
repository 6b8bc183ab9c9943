"""model-asynch throughput: tasks per second through the middleware against a
plain Celery task making the same model call, in the same run.

    .venv/bin/python bench/bench_asynch.py [--tasks 2000] [--concurrency 4] [--rounds 2]

Both sides get the same machine, broker (Redis), model service (its own process,
answering at once) and one Celery worker process with ``--concurrency`` call
threads:

- plain Celery: ``--tasks`` ``.delay()`` calls of a task that POSTs the payload
  with the model's headers (``celery -A bench.bench_asynch:plain_app worker
  --pool threads``); the clock stops when the model service has seen every call;
- the middleware: ``--tasks`` ``POST /task/createTask`` through the Django stack
  (DRF, X-Api-Key), the asynch worker (``celery -A config worker``: claim with
  SKIP LOCKED, Redis semaphore slot per tenant and model with ``maxConcurrency``
  = ``--concurrency``, the call, the result stored as a file, statistics), and
  ``POST /task/getTaskBatch`` pickups (500 ids a call) until every task is
  downloaded (state 4); the clock stops at the last pickup.

The database is ``BENCH_ASYNCH_DATABASE_URL`` (default
``postgres://postgres@127.0.0.1:5432/aijobs_asynch_bench``), created and migrated
if missing; Redis is ``BENCH_ASYNCH_REDIS_URL`` (default db 3).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import requests
from celery import Celery

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import bench._common  # noqa: E402, F401  (run as a script: the settings every process needs)

DATABASE_URL = os.environ.get("BENCH_ASYNCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aijobs_asynch_bench")
REDIS_URL = os.environ.get("BENCH_ASYNCH_REDIS_URL", "redis://127.0.0.1:6379/3")
HEADERS = {"API_KEY": "model-key", "API_STATE": "true", "API_NUM": "123"}
PAYLOAD = {"prompt": "hello", "temperature": 0.2}

# --- the plain Celery baseline (imported by its worker: -A bench.bench_asynch:plain_app) -----------

plain_app = Celery("bench_plain", broker=REDIS_URL)
plain_app.conf.update(task_ignore_result=True, task_acks_late=True, worker_prefetch_multiplier=1)
_local = threading.local()


@plain_app.task(name="bench.plain_call")
def plain_call(url: str, payload: dict, headers: dict, timeout: float) -> None:
    session = getattr(_local, "session", None) or requests.Session()
    _local.session = session
    session.post(url, json=payload, headers=headers, timeout=timeout).raise_for_status()


# --- the model service (its own process) --------------------------------------------------------------


def serve(port: int) -> None:
    seen = 0
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go as two writes: no 40 ms delayed-ACK stall

        def do_GET(self) -> None:
            nonlocal seen
            if self.path.startswith("/__count"):
                with lock:
                    if "reset" in self.path:
                        seen = 0
                    body = json.dumps({"seen": seen}).encode()
            else:
                with lock:
                    seen += 1
                body = b'{"answer": "ok"}'
            self._answer(body)

        def do_POST(self) -> None:
            nonlocal seen
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                seen += 1
            self._answer(b'{"answer": "ok"}')

        def _answer(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


# --- the run --------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)


def ensure_database() -> None:
    import psycopg

    parts = urlsplit(DATABASE_URL)
    name = parts.path.lstrip("/")
    admin = DATABASE_URL.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    env = {**os.environ, "DATABASE_URL": DATABASE_URL}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)


class Worker:
    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self.handle = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", *args, "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
            cwd=ROOT,
            env=env,
            stdout=self.handle,
            stderr=subprocess.STDOUT,
        )
        wait_until(lambda: b" ready." in log.read_bytes() or self.process.poll() is not None, 60, "a worker")
        if self.process.poll() is not None:
            raise SystemExit(log.read_text())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.handle.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2, help="alternate the two sides this many times; best kept")
    parser.add_argument("--producers", type=int, default=4, help="threads creating tasks, on both sides")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return

    ensure_database()
    tmp = Path(tempfile.mkdtemp(prefix="bench-asynch-"))
    base_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": DATABASE_URL,
        "REDIS_URL": REDIS_URL,
        "CELERY_BROKER_URL": REDIS_URL,
        "VAR_DIR": str(tmp),
        "LOG_LEVEL": "WARNING",
        "ASYNCH_WORKER_CONCURRENCY": str(args.concurrency),
        "ASYNCH_WORKER_BATCH_SIZE": str(max(10, args.concurrency)),
        "ASYNCH_WORKER_POLL_INTERVAL": "0.2",
        "ASYNCH_ALLOWED_MODEL_HOSTS": "127.0.0.1",  # the benchmark's model service
    }
    os.environ.update(
        {
            k: base_env[k]
            for k in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "VAR_DIR", "ASYNCH_ALLOWED_MODEL_HOSTS")
        }
    )
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["LOG_LEVEL"] = "WARNING"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import redis
    from rest_framework.test import APIClient

    from asynch import services
    from asynch.models import AsynchModel, AsynchModelStat, AsynchTask, Tenant

    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)], cwd=ROOT)
    model_url = f"http://127.0.0.1:{port}"
    wait_until(lambda: _reachable(model_url), 10, "the model service")

    def seen(reset: bool = False) -> int:
        return requests.get(f"{model_url}/__count{'?reset' if reset else ''}", timeout=5).json()["seen"]

    r = redis.Redis.from_url(REDIS_URL)
    AsynchTask.objects.all().delete()
    AsynchModelStat.objects.all().delete()
    AsynchModel.objects.filter(model_name="bench-model").delete()
    Tenant.objects.filter(name="bench").delete()
    services.model_create(
        model_name="bench-model",
        base_url=model_url,
        route="/v1/chat",
        api_key=",".join(f"{k}:{v}" for k, v in HEADERS.items()),
        max_concurrency=args.concurrency,
        queue_limit=0,
        timeout_seconds=30,
    )
    tenant = services.tenant_create(name="bench")
    key = services.tenant_key_create(tenant=tenant).key
    n = args.tasks

    producers = args.producers

    def split(total: int) -> list[int]:
        return [total // producers + (1 if i < total % producers else 0) for i in range(producers)]

    def run_threads(target, counts: list[int]) -> None:  # type: ignore[no-untyped-def]
        threads = [threading.Thread(target=target, args=(count,)) for count in counts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def run_plain() -> float:
        worker = Worker(
            [
                "-A",
                "bench.bench_asynch:plain_app",
                "worker",
                "--pool",
                "threads",
                "--concurrency",
                str(args.concurrency),
            ],
            base_env,
            tmp / "plain.log",
        )

        def produce(count: int) -> None:
            with plain_app.connection_for_write(REDIS_URL) as conn:
                for _ in range(count):
                    plain_call.apply_async((f"{model_url}/v1/chat", PAYLOAD, HEADERS, 30), connection=conn)

        try:
            seen(reset=True)
            start = time.perf_counter()
            run_threads(produce, split(n))
            wait_until(lambda: seen() >= n, 600, "the plain Celery calls")
            return time.perf_counter() - start
        finally:
            worker.stop()

    def run_middleware() -> float:
        from django.db import connections

        AsynchTask.objects.all().delete()
        r.delete("celery", "asynch:kick")
        worker = Worker(
            ["-A", "config", "worker", "--pool", "threads", "--concurrency", "2"], base_env, tmp / "asynch.log"
        )
        created: queue.Queue[str] = queue.Queue()
        errors: list[str] = []

        def produce(count: int) -> None:
            producer = APIClient()
            producer.credentials(HTTP_X_API_KEY=key)
            try:
                for _ in range(count):
                    response = producer.post(
                        "/task/createTask", {"modelName": "bench-model", "requestPayload": PAYLOAD}, format="json"
                    )
                    if response.status_code != 201:
                        errors.append(response.content.decode())
                        return
                    created.put(response.json()["taskId"])
            finally:
                connections.close_all()

        def pick_up() -> None:
            """A business service polling getTaskBatch (500 ids a call) until it has every result."""
            picker = APIClient()
            picker.credentials(HTTP_X_API_KEY=key)
            pending: list[str] = []
            picked = 0
            try:
                while picked < n and not errors:
                    while not created.empty():
                        pending.append(created.get_nowait())
                    chunks = [pending[i : i + 500] for i in range(0, len(pending), 500)]
                    for chunk in chunks:
                        response = picker.post("/task/getTaskBatch", {"taskIds": chunk}, format="json")
                        if response.status_code != 200:
                            errors.append(response.content.decode())
                            return
                        done = {row["taskId"] for row in response.json()["results"] if row["state"] == 4}
                        picked += len(done)
                        pending = [task_id for task_id in pending if task_id not in done]
                    time.sleep(0.25)  # a business poller asks every so often, not in a tight loop
            finally:
                connections.close_all()

        try:
            seen(reset=True)
            start = time.perf_counter()
            picker = threading.Thread(target=pick_up)
            picker.start()
            run_threads(produce, split(n))
            created_in = time.perf_counter() - start
            picker.join()
            elapsed = time.perf_counter() - start
            print(f"  middleware: created in {created_in:.1f}s, all picked up at {elapsed:.1f}s", flush=True)
            if errors:
                raise SystemExit(f"the middleware answered an error: {errors[0]}")
            assert seen() == n, f"the model service saw {seen()} calls for {n} tasks"
            return elapsed
        finally:
            worker.stop()

    rounds: list[tuple[float, float]] = []  # (plain, middleware) tasks/s, measured back to back
    try:
        for round_no in range(1, args.rounds + 1):
            plain, middleware = n / run_plain(), n / run_middleware()
            rounds.append((plain, middleware))
            print(
                f"round {round_no}: plain Celery {plain:7.1f} tasks/s   middleware {middleware:7.1f} tasks/s"
                f"   ratio {middleware / plain:4.0%}",
                flush=True,
            )
        stats = sum(AsynchModelStat.objects.values_list("request_count", flat=True))
    finally:
        server.terminate()
        server.wait()
    print()
    print(
        f"tasks: {n}, producer threads: {producers}, call threads: {args.concurrency}, maxConcurrency: {args.concurrency}"
    )
    print(f"plain Celery task (call only), best round     {max(p for p, _ in rounds):8.1f} tasks/s")
    print(f"model-asynch (create, run, store, pickup)     {max(m for _, m in rounds):8.1f} tasks/s")
    print(f"ratio, median of the rounds                   {statistics.median(m / p for p, m in rounds):8.0%}")
    print(f"(statistics counted {stats} calls for {n * args.rounds} middleware tasks)")


def _reachable(url: str) -> bool:
    try:
        requests.get(url + "/__count", timeout=1)
        return True
    except requests.RequestException:
        return False


if __name__ == "__main__":
    main()
