"""The first hour, checked from outside: the quick start of the README and of the docs'
Getting started is what ``make run`` prints, and run as it stands (curl and jq in bash)
against a live ``make run`` on the embedded default it ends with the demo learner's records
listed; the model-asynch block's task comes back with the stand-in's answer; the docs'
createModel example registers its model; an account of one's own is made. The same
``make run`` is quiet: each warning once, no error, no line while idle."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from ops import quickstart
from tests import environment
from tests.support.runtime_fixtures import ROOT, free_port, wait_for

README = ROOT / "README.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
MODEL_ASYNCH = ROOT / "docs" / "api" / "model-asynch.md"
DEFAULT_API = quickstart.DEFAULTS["api"]
# What the suite's environment points at PostgreSQL and Redis; make run is the embedded default.
NOT_EMBEDDED = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "METRICS_REDIS_URL", "PROMETHEUS_MULTIPROC_DIR",
                "MAKEFLAGS", "MFLAGS", "MAKELEVEL")  # fmt: skip


def test_the_readmes_quick_start_is_what_make_run_prints():
    readme = README.read_text()
    for block in quickstart.BLOCKS:
        assert quickstart.readme_block(readme, block) == quickstart.render(block), f"README's {block} block drifted"


def test_the_docs_quick_start_is_what_make_run_prints():
    page = GETTING_STARTED.read_text()
    for block in quickstart.BLOCKS:
        assert quickstart.readme_block(page, block) == quickstart.render(block), f"the docs' {block} block drifted"


@dataclass
class MakeRun:
    api: str
    log: Path

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()


@pytest.fixture(scope="module")
def make_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeRun]:
    """``make run`` as a learner starts it, on its own ports and var/ folder."""
    if not shutil.which("jq"):
        pytest.fail("jq is not installed (make test installs it)")
    if (ROOT / ".env").exists() and "PLATFORM_DEEPSEEK_API_KEY=" in (ROOT / ".env").read_text():
        pytest.skip("a .env names a platform key: make run would call DeepSeek, not the stand-in")
    var = tmp_path_factory.mktemp("make-run")
    port, standin = free_port(), free_port()
    # Nor the suite's test-only keys, nor its DEBUG: make run supplies its own development values.
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in NOT_EMBEDDED and key not in environment.SUPPLIED and key != "DEBUG"
    }
    env["VAR_DIR"] = str(var / "var")
    log = var / "make-run.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"RUN_PORT={port}", f"STANDIN_PORT={standin}"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    run = MakeRun(api=f"http://127.0.0.1:{port}", log=log)

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError("make run exited:\n" + log.read_text()[-3000:])
        try:
            up = requests.get(run.api + "/readyz", timeout=2).status_code == 200
        except requests.RequestException:
            return False
        return up and any("runtime dev-runtime:" in line for line in run.lines())

    try:
        wait_for(ready, timeout=120, every=0.5, what="make run")
        yield run
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _paste(run: MakeRun, block: str, page: Path = README) -> list[str]:
    """The block of ``page`` (the README's, unless told) as it stands (but for make run's
    port), in bash."""
    done = _run(run, block, page)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout.splitlines()


def _run(run: MakeRun, block: str, page: Path = README) -> subprocess.CompletedProcess[str]:
    script = quickstart.readme_block(page.read_text(), block)
    assert script is not None and f"API={DEFAULT_API}" in script
    return subprocess.run(
        ["bash", "-c", script.replace(DEFAULT_API, run.api)], capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_make_run_prints_the_quick_start_with_its_own_port(make_run):
    summary = make_run.log.read_text()
    for block in quickstart.BLOCKS:  # every block the README shows
        assert quickstart.render(block, api=make_run.api) in summary, f"make run did not print the {block} block"


@pytest.mark.slow
def test_make_run_then_the_readmes_quick_start_ends_with_the_learners_records(make_run):
    out = _paste(make_run, "learner")
    job = json.loads(out[0])
    assert job["status"] == "succeeded" and job["errorCode"] is None
    analysis = json.loads("\n".join(out[1:6]))
    assert analysis["level"] in ("beginner", "developing", "proficient", "advanced") and analysis["summary"]
    records = [json.loads(line) for line in out[6:]]
    studied = [r for r in records if "isCorrect" in r]
    questions = [r for r in records if "stem" in r]
    assert len(studied) == 12 and sum(not r["isCorrect"] for r in studied) == 5
    assert len(questions) == 5 and records[-1] == questions[-1]  # it ends with the learner's records


@pytest.mark.slow
def test_the_readmes_model_asynch_trip_brings_back_the_stand_ins_answer(make_run):
    out = _paste(make_run, "model_asynch")
    assert json.loads(out[0]) == {"modelName": "demo-chat", "maxConcurrency": 2, "queueLimit": 20}
    assert out[-1] == "This is the local stand-in model, not DeepSeek. You said: Hello!"


@pytest.mark.slow
def test_the_docs_create_model_example_registers_its_model_masked(make_run):
    (line,) = _paste(make_run, "create_model", MODEL_ASYNCH)
    assert json.loads(line) == {
        "modelName": "model-service",
        "apiKey": "Authorization:****-key,X-Team:****",
        "enabled": 1,
    }


@pytest.mark.slow
def test_an_account_of_ones_own_from_the_readme(make_run):
    out = _paste(make_run, "account")
    assert json.loads(out[0]) == {"aiAnalysisEnabled": True}
    assert json.loads(out[1])["userId"].startswith("usr_")
    # Pasted again: its fixed username is taken, and the block stops there, showing the server's error.
    again = _run(make_run, "account")
    assert again.returncode != 0 and again.stdout == ""
    error = _servers_error(again.stderr)
    assert (error["code"], list(error["fields"])) == ("VALIDATION_ERROR", ["username"])


@pytest.mark.slow
def test_a_block_stops_at_the_first_failure_with_the_servers_error(make_run):
    """The learner's block with a wrong password: no step after the login runs."""
    script = quickstart.render("learner", api=make_run.api, password="not-the-password")
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and done.stdout == ""
    assert _servers_error(done.stderr)["code"] == "UNAUTHORIZED"


def _servers_error(stderr: str) -> dict:
    """The error body the block showed (beside curl's own line: ``curl: (22) ... error: 400``)."""
    [body] = [line for line in stderr.splitlines() if line.startswith("{")]
    assert "curl: (22)" in stderr
    return json.loads(body)["error"]


@pytest.mark.slow
def test_make_run_says_each_warning_once_logs_no_error_and_nothing_while_idle(make_run):
    time.sleep(3)  # what the quick start's jobs set going is written by now
    before = len(make_run.lines())
    time.sleep(20)
    idle = make_run.lines()[before:]
    assert len(idle) <= 1, idle  # no line a second, nor one every few
    text = make_run.log.read_text()
    assert text.count("CREDENTIAL_ENCRYPTION_KEYS is not set") == 1  # the summary's line
    assert text.count("NOT from DeepSeek") == 1  # the stand-in's own line
    assert "No hostname was supplied" not in text and " ERROR " not in text
    assert "celery beat v" not in text and "[tasks]" not in text  # no banners
