"""Helpers for the hostile-input, safe-default and probe tests: gunicorn serving the
test database with its access log on (``tests.support.ops.gunicorn``), JSON nested to
order, raw HTTP for what a client library refuses to send, and reading the log as a
log reader does (``str.splitlines``: ``\\x0b``, ``\\x1c``, ``\\x85``, U+2028 end a line too)."""

from __future__ import annotations

import contextlib
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.support.ops import Gunicorn, gunicorn

RUNTIME_TOKEN = "ops-runtime-token-for-the-test-servers"  # what tests.support.ops.gunicorn admits
# The first characters of a line the text formatter starts: its time, then the level.
TEXT_RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ")


def nested(depth: int, leaf: str = "1", *, key: str | None = None) -> str:
    """JSON nested ``depth`` levels deep: ``[[[1]]]``, or ``{"k": {"k": 1}}`` with a key."""
    if key is None:
        return "[" * depth + leaf + "]" * depth
    return f'{{"{key}": ' * depth + leaf + "}" * depth


def nested_value(depth: int) -> Any:
    return json.loads(nested(depth))


@contextlib.contextmanager
def live(log: Path, **env: str) -> Iterator[Gunicorn]:
    """One gunicorn worker (every line in one log, in order) on the test database."""
    with gunicorn(log, workers=1, env={"LOG_LEVEL": "INFO", **env}) as server:
        yield server


def raw_http(base_url: str, request: bytes, *, timeout: float = 10.0) -> tuple[int, bytes]:
    """Send ``request`` as it is; the answer's status and body."""
    parts = urlsplit(base_url)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def log_lines(server: Gunicorn) -> list[str]:
    return server.log.read_text(encoding="utf-8", errors="replace").splitlines()


def forged_lines(lines: list[str], log_format: str) -> list[str]:
    """Lines no formatter started: in text, one that is neither a record (time, level)
    nor a traceback's indented line; in JSON, one that is not an object."""
    if log_format == "text":
        return [line for line in lines if not (TEXT_RECORD.match(line) or line.startswith(" "))]
    bad = []
    for line in lines:
        try:
            if not isinstance(json.loads(line), dict):
                bad.append(line)
        except ValueError:
            bad.append(line)
    return bad
