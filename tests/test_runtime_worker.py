"""The reference runtime as a whole: it is a client of the server (it imports nothing
of it but the output schemas and the error codes), and keys stay out of its logs."""

from __future__ import annotations

import logging

from runtime_worker import redact
from tests.support.runtime_worker import credential

# --- the runtime is a client of the server ----------------------------------------------------------

SERVER_APPS = {"ai_jobs", "learning", "credentials", "quotas", "asynch", "config"}
SHARED = {"ai_jobs.output_schemas", "config.errors"}


def test_the_runtime_imports_nothing_of_the_server_but_the_schemas_and_error_codes():
    import ast
    from pathlib import Path

    offending = []
    for path in (Path(__file__).resolve().parent.parent / "runtime_worker").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in SERVER_APPS and not any(
                    name == s or name.startswith(s + ".") or s.startswith(name) for s in SHARED
                ):
                    offending.append(f"{path.name}: {name}")
    assert offending == []


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
