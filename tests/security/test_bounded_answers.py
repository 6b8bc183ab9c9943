"""Bounded answers (contract section 10), as a hostile model service would try them:
configs set through the live API (gunicorn), the project's worker drain in this process.

- A 64 MiB answer (with or without a Content-Length, or gzip-compressed to almost
  nothing) fails the call, saying the answer was too large, and is not stored; the
  worker reads it as a stream, so its memory does not grow by the answer's size
  (measured with tracemalloc around the drain).
- A model that drips its answer, a byte at a time, is cut off at the config's
  ``timeoutSeconds``: the call's whole time, not each read."""

from __future__ import annotations

import gzip
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from asynch.models import AsynchTask
from tests.support.security.egress import (  # noqa: F401  (fixtures)
    MODEL_HOST,
    api,
    drain,
    shared_var,
    tenant_http,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MIB = 1024 * 1024
CHUNK = b"x" * MIB  # one buffer, sent again and again: the server holds no 64 MiB either


@contextmanager
def hostile_model(kind: str) -> Iterator[str]:
    """A model service on MODEL_HOST that answers ``kind``: ``huge`` (64 MiB, no length),
    ``huge-declared`` (64 MiB with its Content-Length), ``bomb`` (64 MiB of zeros,
    gzip-compressed), ``drip`` (a byte every 0.2 s, for a minute)."""
    bomb = gzip.compress(b"\0" * (64 * MIB), compresslevel=9) if kind == "bomb" else b""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the body ends when the connection closes

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if kind == "huge-declared":
                self.send_header("Content-Length", str(64 * MIB))
            if kind == "bomb":
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(bomb)))
            self.end_headers()
            try:
                if kind == "bomb":
                    self.wfile.write(bomb)
                elif kind == "drip":
                    for _ in range(300):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(0.2)
                else:
                    for _ in range(64):
                        self.wfile.write(CHUNK)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the worker hung up: what it should do

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer((MODEL_HOST, 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://{MODEL_HOST}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("kind", ["huge", "huge-declared", "bomb"])
def test_a_64_mib_answer_fails_the_call_and_the_workers_memory_does_not_grow_by_it(api, shared_var, kind):  # noqa: F811
    admin = tenant_http(api, "ops", is_admin=True)
    biz = tenant_http(api, "biz")
    with hostile_model(kind) as url:
        assert admin.create_model("chat", url, timeoutSeconds=60, retryTimes=0).status_code == 201
        task_id = biz.create_task("chat")
        tracemalloc.start()
        try:
            drained = drain()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert drained.get("failed") == 1, drained
    result = biz.result(task_id)
    assert result["state"] == 3 and "too large" in result["errorMessage"], result
    assert "ASYNCH_MAX_ANSWER_BYTES" in result["errorMessage"] and result["ossFile"] is None
    task = AsynchTask.objects.get(id=task_id)
    assert not task.oss_file
    # At most the limit (16 MiB) and a chunk were ever held; never the 64 MiB answer.
    assert peak < 24 * MIB, f"{peak / MIB:.1f} MiB at the peak"


def test_a_model_that_drips_its_answer_is_cut_off_at_the_calls_timeout(api, shared_var):  # noqa: F811
    admin = tenant_http(api, "ops", is_admin=True)
    biz = tenant_http(api, "biz")
    with hostile_model("drip") as url:
        # Each byte comes well within any per-read timeout; the whole answer never would.
        assert admin.create_model("chat", url, timeoutSeconds=2, retryTimes=0).status_code == 201
        task_id = biz.create_task("chat")
        started = time.monotonic()
        drained = drain()
        took = time.monotonic() - started
    assert drained.get("failed") == 1, drained
    result = biz.result(task_id)
    assert result["state"] == 3 and "did not answer within 2s" in result["errorMessage"], result
    assert took < 8, took
