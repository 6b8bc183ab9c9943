"""The stand-in over HTTP: ``POST /chat/completions``, ``GET /models`` (also under
``/v1``), and the control endpoints ``/_standin/faults`` and ``/_standin/stats``."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from runtime_worker.standin.model import MODELS, StandinModel

logger = logging.getLogger(__name__)

# credentials.services reads this header to say that the stand-in accepts any key.
STANDIN_HEADER = "X-Standin"
STANDIN_HEADER_VALUE = "accepts-any-key"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StandinServer

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("stand-in: " + format, *args)

    def _send(self, status: int, body: dict[str, Any] | None) -> None:
        data = json.dumps(body or {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        # Every answer says what it is: a key test against the stand-in proves nothing.
        self.send_header(STANDIN_HEADER, STANDIN_HEADER_VALUE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    def _authorized(self) -> bool:
        scheme, _, key = (self.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() == "bearer" and key.strip():
            return True
        self._send(
            401, {"error": {"message": "Authentication Fails (no such API key)", "type": "authentication_error"}}
        )
        return False

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/models", "/v1/models"):
            if self._authorized():
                self._send(
                    200,
                    {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "deepseek"} for m in MODELS]},
                )
        elif path == "/_standin/stats":
            self._send(200, self.server.model.snapshot_stats())
        elif path in ("", "/health"):
            self._send(200, {"ok": True, "standin": True})
        else:
            self._send(404, {"error": {"message": "Not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            body = self._body()
        except (ValueError, RecursionError):
            self._send(400, {"error": {"message": "Invalid JSON body", "type": "invalid_request_error"}})
            return
        if path == "/_standin/faults":
            if not isinstance(body, dict) or not isinstance(body.get("faults", []), list):
                self._send(400, {"error": {"message": 'Expected {"faults": [...]}', "type": "invalid_request_error"}})
                return
            if body.get("replace"):
                self.server.model.clear_faults()
            self.server.model.add_faults(list(body.get("faults") or []))
            self._send(200, {"ok": True})
            return
        if path not in ("/chat/completions", "/v1/chat/completions"):
            self._send(404, {"error": {"message": "Not found", "type": "invalid_request_error"}})
            return
        if not self._authorized():
            return
        answer = self.server.model.complete(body if isinstance(body, dict) else {})
        if answer.delay:
            time.sleep(answer.delay)
        if answer.body is None:  # drop: no answer at all
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._send(answer.status, answer.body)
        # What the model served, once the answer is on its way (every token of it is charged).
        self.server.model.served((answer.body or {}).get("usage"))

    def do_DELETE(self) -> None:
        if self.path.rstrip("/") == "/_standin/faults":
            self.server.model.clear_faults()
            self._send(200, {"ok": True})
        else:
            self._send(404, {"error": {"message": "Not found", "type": "invalid_request_error"}})


class StandinServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), _Handler)
        self.model = StandinModel()
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> StandinServer:
        self._thread = threading.Thread(target=self.serve_forever, name="standin-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
