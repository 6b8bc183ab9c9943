"""Migrations run for real, in a ``manage.py migrate`` process on a database of the
test's own (``DATABASE_URL``), so a migration's forward and backward steps are the ones
an operator runs."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.runtime_fixtures import ROOT


def migrate(url: str, tmp_path, *target: str) -> None:
    env = {**os.environ, "DATABASE_URL": url, "VAR_DIR": str(tmp_path)}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", *target, "-v0"], cwd=ROOT, env=env, check=True, capture_output=True
    )
