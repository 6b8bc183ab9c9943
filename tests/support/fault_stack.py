"""The project as production runs it, on private servers, for the fault tests:
gunicorn, two Celery workers and Celery beat, two runtimes (all processes) and the
stand-in model, over a private PostgreSQL database, a private Redis (cache,
throttles, semaphore) and a broker (the private Redis, or RabbitMQ through a
``TcpProxy``); and ``Load``, threads that call the API in a loop and record every
answer, so a test can say what clients saw before, during and after a fault."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import requests

from tests.support.fault_fixtures import free_port, stop_process

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_TOKEN = "fault-runtime-token-of-the-fault-stack"
PLATFORM_KEY = "sk-fault-platform-secret-key-0123456789"

SEED_USERS = """
import json
from django.contrib.auth import get_user_model
from accounts.api.tokens import RefreshToken
from quotas.models import UserAiSettings
User = get_user_model()
User.objects.create_superuser("ops", password="ops-password")
learners = [User.objects.create_user(f"learner{i}", password="pw") for i in range({users})]
for u in learners:
    UserAiSettings.objects.create(user=u, ai_analysis_enabled=True)  # they consented to AI analysis
print(json.dumps([[str(RefreshToken.for_user(u).access_token), "me"] for u in learners]))
"""


class Stack:
    def __init__(self, folder: Path, *, database_url: str, redis_url: str, broker_url: str, model_url: str,
                 **env: str) -> None:  # fmt: skip
        self.folder = folder
        self.database_url = database_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": database_url,
            "DB_CONN_MAX_AGE": "60",
            "REDIS_URL": redis_url,
            "CELERY_BROKER_URL": broker_url,
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "VAR_DIR": str(folder / "var"),
            "RUNTIME_SERVICE_TOKENS": RUNTIME_TOKEN,
            "PLATFORM_DEEPSEEK_API_KEY": PLATFORM_KEY,
            "DEEPSEEK_BASE_URL": model_url,
            "RUNTIME_THROTTLE_RATE": "10000000/min",
            "USER_THROTTLE_RATE": "10000000/min",
            "AUTH_THROTTLE_RATE": "10000000/min",
            "AUTH_ADDRESS_THROTTLE_RATE": "10000000/min",
            "AUTH_FAILURE_THROTTLE_RATE": "10000000/min",
            "CREDENTIAL_TEST_THROTTLE_RATE": "10000000/min",
            "AI_DEFAULT_MAX_DAILY_JOBS": "1000000",
            "AI_DEFAULT_MAX_DAILY_TOKEN_BUDGET": "1000000000",
            "PLATFORM_DAILY_TOKEN_BUDGET": "100000000000",
            "PLATFORM_DAILY_COST_BUDGET_CENTS": "100000000000",
            "AI_JOB_LOCK_SECONDS": "15",
            "AI_JOB_REAPER_INTERVAL_SECONDS": "5",
            "AI_JOB_RETRY_BACKOFF_BASE_SECONDS": "0.2",
            "AI_JOB_RETRY_BACKOFF_MAX_SECONDS": "1",
            "ASYNCH_WORKER_POLL_INTERVAL": "0.5",
            "ASYNCH_CLEANER_INTERVAL": "5",
            "ASYNCH_LEASE_SECONDS": "15",
            "LOG_LEVEL": "WARNING",
            **env,
        }

    # --- set-up ----------------------------------------------------------------------------

    def manage(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, f"manage.py {args[0]}: {done.stdout}{done.stderr}"
        return done.stdout

    def migrate(self) -> None:
        self.manage("migrate", "--noinput", "-v0")

    def seed_users(self, users: int) -> list[tuple[str, str]]:
        """``users`` learners (a JWT and the user id each) and the staff user ``ops``."""
        return json.loads(
            self.manage("shell", "-c", SEED_USERS.replace("{users}", str(users))).strip().splitlines()[-1]
        )

    def tenant_key(self, tenant: str) -> str:
        return self.manage("create_tenant_key", tenant, "--admin").strip().splitlines()[-1]

    # --- processes ---------------------------------------------------------------------------

    def _spawn(self, name: str, command: list[str], **env: str) -> subprocess.Popen[bytes]:
        with (self.folder / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(command, cwd=ROOT, env={**self.env, **env}, stdout=log, stderr=subprocess.STDOUT)
        self.processes[name] = process
        return process

    def start_web(self) -> None:
        self._spawn("web", [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{self.port}",
                            "--workers", "2", "--threads", "8", "--log-level", "warning",
                            "--access-logfile", str(self.folder / "access.log"),
                            "--access-logformat", "%(s)s %(m)s %(U)s"])  # fmt: skip

    def start_worker(self, name: str, **env: str) -> None:
        """As ``make run`` and its systemd unit start it."""
        self._spawn(name, [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "threads",
                           "--concurrency", "2", "--loglevel", "INFO", "-n", f"{name}@%h"], **env)  # fmt: skip

    def start_beat(self) -> None:
        self._spawn("beat", [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
                             "-s", str(self.folder / "beat-schedule")])  # fmt: skip

    def start_runtime(self, name: str, *, concurrency: int = 4) -> None:
        self._spawn(name, [sys.executable, "manage.py", "run_runtime", "--grace-seconds", "5"],
                    RUNTIME_API_URL=self.url, RUNTIME_SERVICE_TOKEN=RUNTIME_TOKEN, RUNTIME_INSTANCE_ID=name,
                    RUNTIME_CONCURRENCY=str(concurrency), RUNTIME_HEARTBEAT_SECONDS="2",
                    RUNTIME_POLL_INTERVAL_MS="100", LOG_LEVEL="INFO")  # fmt: skip

    def log(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start_all(self, *, runtimes: dict[str, int]) -> dict[str, int]:
        """The whole deployment: web, two Celery workers, one beat and the given runtimes
        (name: concurrency), ready; their pids, to check later that none was restarted."""
        self.start_web()
        for name in ("w1", "w2"):
            self.start_worker(name)
        self.start_beat()
        for name, concurrency in runtimes.items():
            self.start_runtime(name, concurrency=concurrency)
        self.wait_ready()
        return self.pids()

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        for name, process in self.processes.items():
            while True:
                assert process.poll() is None, f"{name} exited: {self.log(name)[-3000:]}"
                if self._ready(name):
                    break
                assert time.monotonic() < deadline, f"{name} did not start: {self.log(name)[-3000:]}"
                time.sleep(0.1)

    def _ready(self, name: str) -> bool:
        if name == "web":
            try:
                return requests.get(f"{self.url}/api/schema", timeout=2).status_code == 200
            except requests.RequestException:
                return False
        if name == "beat":
            return "beat: Starting..." in self.log(name)
        if name.startswith("w"):
            return " ready." in self.log(name)
        return True  # a runtime works as soon as it runs

    def pids(self) -> dict[str, int]:
        return {name: process.pid for name, process in self.processes.items()}

    def exited(self) -> dict[str, int | None]:
        return {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}

    def stop(self) -> None:
        for process in self.processes.values():
            stop_process(process)

    # --- what happened -------------------------------------------------------------------------

    def task_runs(self, task: str, *, after: float) -> list[float]:
        """When the workers finished a run of Celery task ``task`` without an error,
        after the wall-clock time ``after`` (their log lines' times)."""
        runs = []
        for name in self.processes:
            if not name.startswith("w"):
                continue
            for line in self.log(name).splitlines():
                if f"Task {task}[" in line and "] succeeded in" in line:
                    stamp = datetime.datetime.strptime(" ".join(line.split()[:2]), "%Y-%m-%d %H:%M:%S,%f")
                    if stamp.timestamp() > after:
                        runs.append(stamp.timestamp())
        return sorted(runs)

    def served(self) -> Counter[int]:
        """Every status gunicorn answered, whoever asked (runtimes included)."""
        path = self.folder / "access.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return Counter(int(line.split()[0]) for line in lines if line.split() and line.split()[0].isdigit())

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.database_url, connect_timeout=5, autocommit=True) as conn:
            cursor = conn.execute(query, params)
            return cursor.fetchall() if cursor.description else []


@dataclass
class Answer:
    what: str
    started: float  # time.monotonic()
    ended: float
    status: int | str  # an HTTP status, or "refused" / "timeout"
    code: str | None = None  # the error code of the answer
    retry_after: str | None = None


class Load:
    """Threads calling the API in a loop until ``stop()``; every answer is kept."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.answers: list[Answer] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def add(self, what: str, call: Callable[[requests.Session, str], requests.Response], *, pause: float = 0.05,
            session: requests.Session | None = None) -> None:  # fmt: skip
        """``call(session, base_url)`` makes one request; ``pause`` between two."""
        thread = threading.Thread(target=self._loop, args=(what, call, pause, session or requests.Session()),
                                  name=f"load-{what}", daemon=True)  # fmt: skip
        self._threads.append(thread)
        thread.start()

    def _loop(self, what: str, call: Callable[..., requests.Response], pause: float, session: requests.Session) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            code = retry_after = None
            try:
                response = call(session, self.base_url)
                status: int | str = response.status_code
                retry_after = response.headers.get("Retry-After")
                if status >= 400:
                    try:
                        code = response.json()["error"]["code"]
                    except (ValueError, KeyError, TypeError):
                        code = None
            except requests.ConnectionError:
                status = "refused"
            except requests.Timeout:
                status = "timeout"
            with self._lock:
                self.answers.append(Answer(what, started, time.monotonic(), status, code, retry_after))
            self._stop.wait(pause)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def between(self, start: float, end: float) -> list[Answer]:
        return [a for a in self.answers if start <= a.started < end]


def wait_until(condition: Callable[[], Any], *, timeout: float, every: float = 0.2, what: str = "") -> float:
    """Poll ``condition`` until truthy; the monotonic time it became so."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return time.monotonic()
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(every)


def create_model(stack: Stack, tenant_key: str, base_url: str, **fields: Any) -> None:
    """A model-asynch model config, through the API as a business service makes one."""
    body = {"modelName": "model-service", "baseUrl": base_url, "route": "/call", "apiKey": "K:V",
            "maxConcurrency": 2, "queueLimit": 0, "timeoutSeconds": 30, "retryTimes": 3,
            "retryQueueMaxSeconds": 0, **fields}  # fmt: skip
    answer = requests.post(f"{stack.url}/model/createModel", json=body, headers={"X-Api-Key": tenant_key}, timeout=30)
    assert answer.status_code in (200, 201), answer.text


def create_task(stack: Stack, tenant_key: str, n: int, session: requests.Session | None = None) -> requests.Response:
    return (session or requests).post(
        f"{stack.url}/task/createTask",
        json={"modelName": "model-service", "requestPayload": {"n": n}},
        headers={"X-Api-Key": tenant_key},
        timeout=30,
    )


def create_job(stack: Stack, token: str, user_id: str, key: str, session: requests.Session | None = None):
    return (session or requests).post(
        f"{stack.url}/ai/jobs",
        json={"jobType": "learning_state_analysis", "targetType": "user", "targetId": user_id, "idempotencyKey": key},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
