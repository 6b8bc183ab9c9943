"""A runtime machine holds no server secret (contract section 7): the reference runtime is
a program of its own. In a virtualenv built only from ``runtime_worker/requirements.txt``
(no Django there at all), ``env -i PATH=... RUNTIME_API_URL=... RUNTIME_SERVICE_TOKEN=...
python -m runtime_worker`` runs a job to ``succeeded`` against a live server (gunicorn and
the stand-in model), with ``SECRET_KEY``, ``CREDENTIAL_ENCRYPTION_KEYS``, ``DATABASE_URL``
and ``DEBUG`` unset; importing it there loads no Django."""

from __future__ import annotations

import ast
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.runtime_e2e import final, make_job
from tests.support.runtime_fixtures import E2E_TOKEN, HEARTBEAT_SECONDS, api_server, standin  # noqa: F401
from tests.support.runtime_program import ROOT, bare_env, runtime_venv

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SERVER_PACKAGES = {"django", "rest_framework", "config", "ai_jobs", "asynch", "quotas", "credentials", "learning",
                   "accounts", "ops", "delivery", "celery", "psycopg"}  # fmt: skip


def test_importing_the_runtime_in_its_own_venv_loads_no_django():
    python = runtime_venv() / "python"
    shown = subprocess.run(
        [str(python), "-c", "import sys, runtime_worker.runner, runtime_worker.program; "
         "print(sorted({m.split('.')[0] for m in sys.modules}))"],
        cwd=ROOT, env=bare_env(python.parent), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert not SERVER_PACKAGES & set(ast.literal_eval(shown.stdout.strip()))
    # Nor could it: the venv has none of the server's packages.
    assert subprocess.run([str(python), "-c", "import django"], capture_output=True, timeout=60).returncode != 0


def test_the_program_with_only_runtime_settings_runs_a_job_to_succeeded(api_server, tmp_path: Path):  # noqa: F811
    bin_dir = runtime_venv()
    env = bare_env(
        bin_dir,
        RUNTIME_API_URL=api_server,
        RUNTIME_SERVICE_TOKEN=E2E_TOKEN,
        RUNTIME_INSTANCE_ID="own-machine-1",
        RUNTIME_HEARTBEAT_SECONDS=str(HEARTBEAT_SECONDS),
        RUNTIME_POLL_INTERVAL_MS="50",
    )
    assert not {"SECRET_KEY", "CREDENTIAL_ENCRYPTION_KEYS", "DATABASE_URL", "DEBUG"} & set(env)
    job = make_job("learning_state_analysis")
    log = tmp_path / "runtime.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["env", "-i", *(f"{name}={value}" for name, value in env.items()), "python", "-m", "runtime_worker",
             "--grace-seconds", "5"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        done = final(job, timeout=60)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert done.status == "succeeded", (done.status, done.error_code, log.read_text()[-3000:])
    assert done.result.runtime_instance_id == "own-machine-1"  # this program's result, stored
    assert process.returncode == 0, log.read_text()[-3000:]


def test_the_program_refuses_to_start_without_its_token():
    python = runtime_venv() / "python"
    started = subprocess.run(
        [str(python), "-m", "runtime_worker"], cwd=ROOT, env=bare_env(python.parent),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert started.returncode != 0 and "RUNTIME_SERVICE_TOKEN is not set" in started.stderr
