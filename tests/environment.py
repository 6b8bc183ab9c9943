"""Test-only values for the settings that a process with DEBUG false refuses to start
without (``SECRET_KEY``, ``CREDENTIAL_ENCRYPTION_KEYS``). Loaded as a plugin before
anything else (``-p tests.environment`` in pyproject's addopts), so they are in
``os.environ`` before pytest-django imports the settings, and every server, worker and
runtime a test spawns with the environment copied gets the same ones. Fresh for each
run and never a known value; one the caller set already is kept."""

from __future__ import annotations

import base64
import os
import secrets

_TEST_VALUES = {
    "SECRET_KEY": "test-only-" + secrets.token_urlsafe(40),
    "CREDENTIAL_ENCRYPTION_KEYS": "test:" + base64.b64encode(os.urandom(32)).decode(),
}

# The names this plugin set (not those the caller had): a test that needs a process
# without them (make run's own development values) leaves these out.
SUPPLIED = frozenset(name for name, value in _TEST_VALUES.items() if os.environ.setdefault(name, value) == value)
