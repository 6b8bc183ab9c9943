"""No caller can forge a log line (control characters in a request's path
or headers are logged as one line, escaped), tried against gunicorn with its access
log on, in both ``LOG_FORMAT``s: ``curl "$API/%0aFORGED"`` and its cousins (``%0d%0a``,
VT, FS, NEL, U+2028), a raw ``\\r\\n`` in a header, and a runtime instance id from a
header that the application names in a line of its own. The log is read as a log
reader reads it (``str.splitlines``). And masking keys in a line costs time linear
in the line's length, however the line is made."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from ai_jobs.models import AiRuntimeJob
from config.observability.redact import redact
from quotas.models import UserAiSettings
from tests.support.factories import JobFactory
from tests.support.ops import Gunicorn
from tests.support.runtime_fixtures import wait_for
from tests.support.security.input import RUNTIME_TOKEN, forged_lines, live, log_lines, raw_http

FORGING_PATHS = [
    "/%0aFORGED",
    "/%0d%0aFORGED%20200%20OK",
    "/ai/jobs/x%0bFORGED%1cFORGED%1eFORGED",
    "/x%c2%85FORGED%e2%80%a8FORGED%e2%80%a9FORGED",  # NEL, LINE and PARAGRAPH SEPARATOR
    "/x?q=%0aFORGED&r=\x1bFORGED",
]


@pytest.fixture(params=["text", "json"])
def server(request: pytest.FixtureRequest, tmp_path: Path, transactional_db: Any) -> Iterator[tuple[str, Gunicorn]]:
    with live(tmp_path / "gunicorn.log", LOG_FORMAT=request.param) as running:
        yield request.param, running


def _headers(request_id: str, **more: str) -> dict[str, str]:
    return {"X-Request-ID": request_id, **more}


@pytest.mark.slow
def test_a_path_or_a_header_with_control_characters_is_one_escaped_line(server: tuple[str, Gunicorn]):
    log_format, gunicorn = server
    ids = {}
    for n, path in enumerate(FORGING_PATHS):
        ids[path] = f"forge-{n}-{uuid.uuid4().hex[:8]}"
        response = requests.get(gunicorn.url + path, headers=_headers(ids[path]), timeout=10)
        assert response.status_code in (401, 404)
    # A raw CR LF inside a header: the rest is a line of its own on the wire, never in the log.
    status, _ = raw_http(
        gunicorn.url,
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Note: a\r\nFORGED line\r\nConnection: close\r\n\r\n",
    )
    assert status == 400
    # A runtime instance id the application logs when it cancels a job it held.
    instance = "rt-1%0d%0aFORGED\x85FORGED"
    job = JobFactory()
    runtime = {"Authorization": f"Bearer {RUNTIME_TOKEN}", "X-Runtime-Instance-Id": instance}
    claimed = requests.post(
        gunicorn.url + "/internal/runtime/jobs/claim",
        json={"capabilities": [job.job_type], "limit": 1},
        headers=runtime,
        timeout=10,
    )
    assert [j["jobId"] for j in claimed.json()["jobs"]] == [job.id]
    UserAiSettings.objects.filter(user=job.user).update(ai_analysis_enabled=False)  # consent withdrawn
    snapshot = requests.get(f"{gunicorn.url}/internal/runtime/jobs/{job.id}/snapshot", headers=runtime, timeout=10)
    assert snapshot.status_code == 409 and AiRuntimeJob.objects.get(id=job.id).status == "cancelled"

    def written() -> list[str] | None:
        lines = log_lines(gunicorn)
        done = any("withdrew consent" in line for line in lines) and sum("gunicorn.access" in x for x in lines) >= 8
        return lines if done else None

    lines = wait_for(written, timeout=10, what="the access lines")
    assert [line for line in lines if line.startswith("FORGED")] == []
    assert forged_lines(lines, log_format) == []
    for path, request_id in ids.items():
        mine = [line for line in lines if request_id in line]
        access = [line for line in mine if "gunicorn.access" in line]
        assert len(access) == 1 and "FORGED" in access[0], (path, mine)  # one line, the path in it
        if log_format == "json":
            record = json.loads(access[0])
            assert record["requestId"] == request_id and "\n" not in record["message"].split(" ")[0]
    cancelled = [line for line in lines if "withdrew consent" in line]
    assert len(cancelled) == 1 and "FORGED" in cancelled[0]
    if log_format == "json":
        assert "rt-1%0d%0aFORGED\x85FORGED" in json.loads(cancelled[0])["message"]  # escaped, not lost
    else:
        assert "rt-1%0d%0aFORGED\\x85FORGED" in cancelled[0]


# --- redaction is linear in the line's length ------------------------------------------------------

# What each mask's pattern works hardest on: a long run that almost matches, from every word.
ADVERSARIAL = [
    "a.",
    "a-",
    "a+b",
    "a://",
    "a://b:",
    "a.b://c:d",
    "bearer ",
    "Bearer\t",
    "sk-",
    "ak_",
    "x@",
    "/task/download/",
]


def _cost(text: str) -> float:
    """The least CPU time of a few runs: what the machine's other work adds is not ours."""
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        redact(text)
        best = min(best, time.process_time() - started)
        if best > 0.5:  # quadratic: no need to measure it again
            break
    return best


@pytest.mark.parametrize("unit", ADVERSARIAL)
def test_masking_a_long_adversarial_line_costs_time_linear_in_its_length(unit: str):
    line = unit * (200_000 // len(unit) + 1)
    short, long = line[:50_000], line[:200_000]
    ratio = _cost(long) / _cost(short)
    assert ratio < 8, f"four times the line, {ratio:.1f} times the time: quadratic"  # linear: 4; quadratic: 16
