"""Every package is pinned with its hashes: the locks (the server's, the dev tools', the
lock tool's own and the reference runtime's) name each package, direct or transitive,
at one version with at least one sha256, the locks hold every package the ``.in`` files
name at the version they name, the dev lock agrees with the server lock and so does the
runtime's, every install (the commands', the lock tool's) uses ``--require-hashes``, and
what is installed is what was locked. The runtime's own lock is installed alone by
``tests/test_runtime_program.py``."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.embedded

ROOT = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s\\]+)")


def _lock(name: str) -> dict[str, tuple[str, list[str]]]:
    """``{package: (version, hashes)}`` of a pip-compile lock."""
    pins: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in (ROOT / name).read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        pinned = PIN.match(stripped)
        if pinned:
            current = canonicalize_name(pinned.group(1))
            assert current not in pins, f"{name}: {current} pinned twice"
            pins[current] = (pinned.group(2), [])
        elif stripped.startswith("--hash=sha256:"):
            assert current is not None, f"{name}: a hash before any package"
            pins[current][1].append(stripped.removeprefix("--hash=sha256:").rstrip(" \\"))
        else:
            pytest.fail(f"{name}: a line that is neither a pin nor a hash: {line!r}")
    return pins


def _direct(name: str) -> dict[str, str]:
    wanted = {}
    for line in (ROOT / name).read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if text and not text.startswith("-"):
            requirement = Requirement(text)
            [spec] = requirement.specifier
            assert spec.operator == "==", f"{name}: {text} is not pinned"
            wanted[canonicalize_name(requirement.name)] = spec.version
    return wanted


LOCKS = ["requirements.txt", "requirements-dev.txt", "requirements-lock.txt", "runtime_worker/requirements.txt"]


@pytest.mark.parametrize("lock", LOCKS)
def test_each_package_of_a_lock_is_pinned_with_its_hashes(lock: str):
    pins = _lock(lock)
    assert pins
    for package, (_, hashes) in pins.items():
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), f"{lock}: {package}"


@pytest.mark.parametrize(("source", "lock"), [("requirements.in", "requirements.txt"),
                                              ("requirements-dev.in", "requirements-dev.txt"),
                                              ("requirements-lock.in", "requirements-lock.txt"),
                                              ("runtime_worker/requirements.in", "runtime_worker/requirements.txt")])  # fmt: skip
def test_a_lock_holds_what_its_source_names_at_that_version(source: str, lock: str):
    pins = _lock(lock)
    for package, version in _direct(source).items():
        assert pins.get(package, ("missing",))[0] == version, f"{lock}: {package}"


def test_the_dev_lock_installs_the_runtime_lock_as_it_is():
    runtime, dev = _lock("requirements.txt"), _lock("requirements-dev.txt")
    assert {p: v for p, (v, _) in runtime.items()} == {p: dev[p][0] for p in runtime if p in dev}
    assert set(runtime) <= set(dev)


def test_the_runtime_lock_is_the_server_locks_versions_and_holds_no_server_package():
    """The reference runtime installs only what it imports, at the very versions the
    server runs with (tests of the two together test what is deployed)."""
    runtime, server = _lock("runtime_worker/requirements.txt"), _lock("requirements.txt")
    assert {p: v for p, (v, _) in runtime.items()} == {p: server[p][0] for p in runtime}
    assert not {"django", "djangorestframework", "celery", "psycopg", "cryptography", "gunicorn"} & set(runtime)


def test_the_lock_tool_is_installed_from_its_hashed_file():
    makefile = (ROOT / "Makefile").read_text()
    installs = [line for line in makefile.splitlines() if "pip install" in line and "-lock" in line]
    assert installs == [
        "\t@$(VENV)-lock/bin/pip install -qq --disable-pip-version-check --require-hashes -r requirements-lock.txt"
    ]
    assert "pip-tools" in _lock("requirements-lock.txt")


def test_both_commands_install_with_require_hashes():
    installs = [
        line for line in (ROOT / "Makefile").read_text().splitlines() if "pip install" in line and " -r " in line
    ]
    assert installs and all("--require-hashes" in line for line in installs), installs


def test_what_is_installed_is_what_was_locked():
    for package, (version, _) in _lock("requirements-dev.txt").items():
        try:
            installed = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue  # for another platform or Python (a marker): not installed here
        assert installed == version, f"{package}: {installed} installed, {version} locked"
