"""The reference runtime as an operator installs it on a machine of its own: a
virtualenv built only from ``runtime_worker/requirements.txt`` (with
``--require-hashes``), cached under ``var/`` by the file's digest, and the program
started there with an environment that holds nothing but ``PATH`` and ``RUNTIME_*``."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.parallel import cache_lock

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "runtime_worker" / "requirements.txt"


def runtime_venv() -> Path:
    """The runtime's own virtualenv (its ``bin`` folder), built once per requirements file."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    venv = ROOT / "var" / f"runtime-venv-{digest}"
    with cache_lock(venv):  # xdist's workers share it: one builds, the others wait
        return _built(venv)


def _built(venv: Path) -> Path:
    ready = venv / ".installed"
    if ready.exists():
        return venv / "bin"
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-qq", "--disable-pip-version-check", "--require-hashes",
         "-r", str(REQUIREMENTS)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if installed.returncode != 0:
        pytest.fail(f"the runtime's requirements did not install: {installed.stderr[-3000:]}")
    ready.touch()
    return venv / "bin"


def bare_env(bin_dir: Path, **runtime: str) -> dict[str, str]:
    """What ``env -i PATH=... RUNTIME_...=...`` gives the program: nothing of the server's."""
    assert all(name.startswith("RUNTIME_") for name in runtime)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", **runtime}
