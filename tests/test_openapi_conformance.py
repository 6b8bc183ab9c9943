"""The OpenAPI schema tells the truth (it is what clients are built from): Schemathesis, against gunicorn
serving the test database, sends generated requests (valid and invalid) to every
operation of ``/api/schema`` as a learner, a runtime and a tenant, and checks each
answer: its status is documented, its body matches the documented schema, and no
answer is a 5xx. Bounded: a few examples per operation, a time limit for the run."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from django.db import connection

from tests.support.api_walk import RUNTIME_ID, World, build_world
from tests.support.runtime_fixtures import GUNICORN, ROOT, database_url, free_port, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CHECKS = "not_a_server_error,status_code_conformance,response_schema_conformance"
MAX_EXAMPLES = 6
MAX_SECONDS = 60


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    if connection.vendor != "postgresql":
        pytest.skip("gunicorn serves the test database on PostgreSQL")
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "RUNTIME_SERVICE_TOKENS": "test-runtime-token-0123456789abcdef",
        "PLATFORM_DEEPSEEK_API_KEY": "sk-platform-test-key",
        "USER_THROTTLE_RATE": "1000000/min",
        "RUNTIME_THROTTLE_RATE": "1000000/min",
        "AUTH_THROTTLE_RATE": "1000000/min",
        "AUTH_ADDRESS_THROTTLE_RATE": "1000000/min",
        "AUTH_FAILURE_THROTTLE_RATE": "1000000/min",
        "CREDENTIAL_TEST_THROTTLE_RATE": "1000000/min",
        "CELERY_BROKER_URL": "memory://",
        "LOG_LEVEL": "ERROR",
        "DEEPSEEK_BASE_URL": "http://127.0.0.1:9",  # a credential test reaches no provider
    }
    log = tmp_path / "gunicorn.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*GUNICORN, "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "4"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"gunicorn exited: {log.read_text()[-3000:]}")
        try:
            return requests.get(f"{url}/healthz", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    try:
        wait_for(up, timeout=60, what="gunicorn")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _config(world: World, path: Path) -> Path:
    """Who calls what: a runtime the internal API, the learner the user API, the
    (admin) tenant model-asynch; /auth and the probes anonymously."""
    path.write_text(
        f"""
[[operations]]
include-path-regex = "^/internal/"
headers = {{ Authorization = "Bearer {world.runtime_token}", "x-runtime-instance-id" = "{RUNTIME_ID}" }}

[[operations]]
include-path-regex = "^/(ai|learning)/"
headers = {{ Authorization = "Bearer {world.learner_token}" }}

[[operations]]
include-path-regex = "^/(model|task)/"
headers = {{ X-Api-Key = "{world.tenant_key}" }}
"""
    )
    return path


def test_schemathesis_finds_every_answer_of_every_operation_documented(server: str, tmp_path: Path):
    world = build_world()
    schema = requests.get(f"{server}/api/schema", params={"format": "json"}, timeout=10).json()
    operations = sum(1 for item in schema["paths"].values() for method in item if method != "parameters")
    assert operations >= 60
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(_config(world, tmp_path / "schemathesis.toml")),
        "--no-color",
        "run",
        f"{server}/api/schema?format=json",
        "--checks",
        CHECKS,
        "--phases",
        "examples,coverage,fuzzing",
        "--mode",
        "all",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        "20261201",
        # One thread: CPython 3.11's AST constructor keeps its recursion depth per interpreter,
        # and Hypothesis describing its strategies parses lambdas' source from two threads at
        # once now and then fails with "SystemError: AST constructor recursion depth mismatch"
        # (python/cpython#106905), an error of no answer of ours. The run is bounded by time.
        "--workers",
        "1",
        "--request-timeout",
        "20",
        "--max-time",
        str(MAX_SECONDS),
        "--suppress-health-check",
        "all",
        "--generation-database",
        "none",
    ]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=MAX_SECONDS + 120)
    report = run.stdout[-20000:] + run.stderr[-5000:]
    artifacts = ROOT / "var" / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    (artifacts / "schemathesis.txt").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, report
    assert f"{operations} selected" in run.stdout or "selected" in run.stdout, report
    assert "No issues found" in run.stdout or "0 failures" in run.stdout or "passed" in run.stdout, report
