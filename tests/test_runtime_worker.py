"""The reference runtime as a whole: a program of its own (it imports no Django and no
server app, only the framework-free ``protocol`` package), and keys stay out of its logs."""

from __future__ import annotations

import ast
import logging
import os
import subprocess
import sys
from pathlib import Path

from runtime_worker import redact
from tests.support.runtime_worker import credential

# --- the runtime is a client of the server ----------------------------------------------------------

FORBIDDEN = {"django", "rest_framework", "config", "ai_jobs", "asynch", "quotas", "credentials", "learning",
             "accounts", "ops", "delivery"}  # fmt: skip
ROOT = Path(__file__).resolve().parent.parent


def test_the_runtime_imports_no_django_and_no_server_app():
    """Every module but the ``manage.py run_runtime`` wrapper (``management/``)."""
    offending = []
    for path in (ROOT / "runtime_worker").rglob("*.py"):
        if "management" in path.relative_to(ROOT).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            offending += [f"{path.name}: {name}" for name in names if name.split(".")[0] in FORBIDDEN]
    assert offending == []


def test_importing_the_runtime_loads_no_django():
    """What ``python -m runtime_worker`` loads, in a fresh interpreter: no Django, no
    server app, whatever this environment has installed."""
    shown = subprocess.run(
        [sys.executable, "-c", "import sys, runtime_worker.program, runtime_worker.runner; "
         "print(sorted({m.split('.')[0] for m in sys.modules}))"],
        cwd=ROOT, env={"PATH": os.environ.get("PATH", "")}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert not FORBIDDEN & set(ast.literal_eval(shown.stdout.strip()))


# --- keys stay out of logs ------------------------------------------------------------------------


def test_keys_are_masked_in_log_records_and_error_messages(caplog):
    redact.register_secret("my-very-private-user-key")
    handler = logging.Handler()
    records: list[str] = []
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    handler.addFilter(redact.RedactingFilter())
    log = logging.getLogger("runtime_worker.test_redact")
    log.addHandler(handler)
    try:
        log.warning("calling with %s and %s", "my-very-private-user-key", "sk-abcdef1234567890")
    finally:
        log.removeHandler(handler)
    assert records == ["calling with **** and sk-****"]
    assert redact.redact("Bearer sk-live-0123456789abc") == "Bearer sk-****"
    assert "0123456789" not in repr(credential("http://x", key="sk-live-0123456789abc"))
