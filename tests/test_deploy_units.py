"""The systemd units of docs/operations/production.md (Supervision): one per process, each restarted
whatever way it ends (``Restart=always``), and valid for systemd itself."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))


def test_every_process_has_a_unit_that_systemd_always_restarts():
    assert {unit.name for unit in UNITS} == {
        "aijobs-web.service",
        "aijobs-worker@.service",
        "aijobs-beat.service",
        "aijobs-runtime@.service",
    }
    for unit in UNITS:
        lines = unit.read_text().splitlines()
        assert "Restart=always" in lines, unit.name
        # The runtime runs from a virtualenv of its own requirements only, as a program of its own.
        venv = ".venv-runtime" if unit.name == "aijobs-runtime@.service" else ".venv"
        assert any(line.startswith(f"ExecStart=/opt/aijobs/{venv}/bin/") for line in lines), unit.name


def test_the_runtime_unit_starts_the_program_with_only_its_own_settings():
    lines = (ROOT / "deploy" / "systemd" / "aijobs-runtime@.service").read_text().splitlines()
    assert "ExecStart=/opt/aijobs/.venv-runtime/bin/python -m runtime_worker --grace-seconds 30" in lines
    assert "EnvironmentFile=/etc/aijobs/runtime.env" in lines  # not the server's /etc/aijobs/env
    assert not any(line.startswith("EnvironmentFile=/etc/aijobs/env") for line in lines)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_units_verify_with_systemd_against_this_checkout(tmp_path):
    """``systemd-analyze verify`` with the install folder pointed at this checkout, so
    the commands they start must exist here."""
    for unit in UNITS:
        # The runtime's own virtualenv stands for the checkout's (tests/test_runtime_program.py builds one).
        text = unit.read_text().replace(".venv-runtime/", ".venv/")
        text = text.replace("/opt/aijobs", str(ROOT)).replace("EnvironmentFile=", "EnvironmentFile=-")
        name = unit.name.replace("@.service", "@1.service")
        (tmp_path / name).write_text(text)
        done = subprocess.run(["systemd-analyze", "verify", str(tmp_path / name)], capture_output=True, text=True,
                              timeout=60)  # fmt: skip
        problems = [line for line in (done.stdout + done.stderr).splitlines() if name.split("@")[0] in line]
        assert done.returncode == 0 and not problems, done.stdout + done.stderr
