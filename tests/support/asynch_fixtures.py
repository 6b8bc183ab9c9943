"""Helpers for the model-asynch tests: a local model service (a threaded
``http.server`` on 127.0.0.1) that records every call and how many ran at once,
tenants with keys, model configs, running the queue in the test's thread, the
queue's order, and the semaphore seen from outside (one slot taken by hand)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from asynch import semaphore as semaphores
from asynch import services, worker
from asynch.models import AsynchModel, AsynchTask, Tenant


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class ModelServer:
    """A model service. ``behaviour(call, index)`` returns (status, body, delay
    seconds) for the index-th call (0-based); the default answers at once."""

    server: ThreadingHTTPServer
    calls: list[Call] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    behaviour: Callable[[Call, int], tuple[int, Any, float]] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def handle(self, call: Call) -> tuple[int, bytes, str]:
        with self.lock:
            index = len(self.calls)
            self.calls.append(call)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            status, body, delay = (
                self.behaviour(call, index) if self.behaviour else (200, {"echo": call.json, "query": call.query}, 0.0)
            )
            if delay:
                time.sleep(delay)
        finally:
            with self.lock:
                self.in_flight -= 1
        if isinstance(body, bytes):
            return status, body, "application/octet-stream"
        return status, json.dumps(body).encode(), "application/json"


def _handler_for(model_server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go as two writes: no 40 ms delayed-ACK stall

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            call = Call(
                method=self.command,
                path=parts.path,
                query=dict(parse_qsl(parts.query, keep_blank_values=True)),
                headers={k: v for k, v in self.headers.items()},
                body=body,
            )
            status, payload, content_type = model_server.handle(call)
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the caller gave up (timeout)
                pass

        do_GET = do_POST = _serve

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextlib.contextmanager
def local_server() -> Iterator[ModelServer]:
    """A recording server on 127.0.0.1 (a model service, a webhook receiver)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server.daemon_threads = True
    model_server = ModelServer(server=server)
    server.RequestHandlerClass = _handler_for(model_server)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield model_server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(name="model_server")
def model_server_fixture() -> Iterator[ModelServer]:
    with local_server() as model_server:
        yield model_server


@dataclass
class TenantClient:
    tenant: Tenant
    key: str
    client: APIClient

    def post(self, path: str, body: dict[str, Any], **headers: str) -> Any:
        return self.client.post(path, body, format="json", **headers)

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self.client.get(path, params or {})

    def create_task(self, model_name: str, payload: dict[str, Any] | None = None, **extra: Any) -> Any:
        headers = {k: v for k, v in extra.items() if k.startswith("HTTP_")}
        body = {k: v for k, v in extra.items() if not k.startswith("HTTP_")}
        return self.post(
            "/task/createTask", {"modelName": model_name, "requestPayload": payload or {}, **body}, **headers
        )


def tenant_client(name: str, *, is_admin: bool = False) -> TenantClient:
    tenant = services.tenant_create(name=name, is_admin=is_admin)
    key = services.tenant_key_create(tenant=tenant).key
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key)
    return TenantClient(tenant=tenant, key=key, client=client)


def make_model(
    model_name: str = "model-service", *, base_url: str = "http://127.0.0.1:9", **fields: Any
) -> AsynchModel:
    values: dict[str, Any] = {
        "route": "/api/v1/chat",
        "http_method": "POST",
        "enabled": True,
        "max_concurrency": 5,
        "queue_limit": 0,
        "timeout_seconds": 5,
        "retry_times": 3,
        "retry_queue_max_seconds": 600,
        "auto_clean_seconds": 3600,
    }
    values.update(fields)
    api_key = values.pop("api_key", "API_KEY:model-key,API_STATE:true,API_NUM:123")
    return services.model_create(model_name=model_name, base_url=base_url, api_key=api_key, **values)


def run_queue(limit: int = 100) -> list[str]:
    """Claim and run queued tasks in the test's own thread (and database
    transaction), one claim round at a time, until nothing is claimable."""
    outcomes: list[str] = []
    me = worker.worker_id()
    while True:
        claimed = worker.tasks_claim(calls=worker.model_calls(), limit=limit, worker_id=me)
        if not claimed:
            return outcomes
        outcomes += [worker.task_execute(item) for item in claimed]


def queue_order(*, model_name: str, limit: int = 100) -> list[str]:
    """Ids of the model's queued tasks in the order workers take them."""
    return list(
        AsynchTask.objects.filter(model_name=model_name, state=0)
        .order_by("priority", "enqueue_at", "id")
        .values_list("id", flat=True)[:limit]
    )


# --- the semaphore, from outside -------------------------------------------------------------------------

_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[2]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + lease, ARGV[2])
  redis.call('PEXPIRE', KEYS[1], lease * 2)
  return 1
end
return 0
"""


class RedisSemaphore(semaphores.RedisSemaphore):
    """The Redis semaphore with one slot taken at a time (a holder asking again
    renews), under the same rules as the worker's script."""

    def acquire(self, key: str, *, limit: int, token: str, lease_seconds: float) -> bool:
        script = self.client.register_script(_ACQUIRE)
        return bool(script(keys=[key], args=[limit, token, int(lease_seconds * 1000)]))


class FileSemaphore(semaphores.FileSemaphore):
    def acquire(self, key: str, *, limit: int, token: str, lease_seconds: float) -> bool:
        def change(state: dict[str, dict[str, float]], now: float) -> bool:
            held = state.setdefault(key, {})
            if token in held or len(held) < limit:
                held[token] = now + lease_seconds
                return True
            if not held:
                del state[key]
            return False

        return self._update(change)


def get_semaphore() -> RedisSemaphore | FileSemaphore:
    """The semaphore the worker uses (the same Redis keys or state file), seen from outside."""
    used = semaphores.get_semaphore()
    if isinstance(used, semaphores.RedisSemaphore):
        return RedisSemaphore(settings.ASYNCH_SEMAPHORE_REDIS_URL)
    return FileSemaphore(used.path)  # type: ignore[attr-defined]
