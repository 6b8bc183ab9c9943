"""The OpenAPI schema and docs of contract §1."""

import os
import subprocess
import sys
import threading

import pytest
import requests

from tests.fault_fixtures import free_port, port_open, stop_process
from tests.fault_stack import ROOT, wait_until

pytestmark = pytest.mark.django_db


def test_the_schema_lists_every_internal_endpoint(client):
    response = client.get("/api/schema", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in ("poll", "claim", "{job_id}/lock", "{job_id}/heartbeat", "{job_id}/snapshot", "{job_id}/credential",
                 "{job_id}/result", "{job_id}/fail", "{job_id}/invocation-logs"):  # fmt: skip
        assert f"/internal/runtime/jobs/{path}" in paths


def test_the_docs_page_is_served(client):
    response = client.get("/api/docs")
    assert response.status_code == 200 and b"swagger" in response.content.lower()


def test_the_schema_is_valid_openapi_without_a_single_warning(tmp_path):
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert (tmp_path / "schema.yaml").read_text().startswith("openapi: 3")


@pytest.mark.slow
def test_concurrent_first_schema_requests_to_a_fresh_gunicorn_worker_all_succeed(tmp_path):
    """drf-spectacular's generator is not thread-safe: without the view's lock, eight
    threads of a cold worker asking at once get 500s (seen on every try here)."""
    port = free_port()
    env = {**os.environ, "VAR_DIR": str(tmp_path), "LOG_LEVEL": "CRITICAL"}
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1",
         "--threads", "8", "--log-level", "critical"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: port_open(port), timeout=60, every=0.05, what="gunicorn")
        barrier, statuses = threading.Barrier(8), []

        def ask() -> None:
            barrier.wait()
            statuses.append(requests.get(f"http://127.0.0.1:{port}/api/schema", timeout=60).status_code)

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        stop_process(server)
    assert statuses == [200] * 8
