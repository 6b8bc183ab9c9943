"""The production setup is the same code with the environment set (contract §7)."""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_check_deploy_is_clean_with_the_production_environment(tmp_path):
    env = {
        **os.environ,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "api.example.com",
        "RUNTIME_SERVICE_TOKENS": secrets.token_urlsafe(32),
        "CREDENTIAL_ENCRYPTION_KEYS": "k1:" + base64.b64encode(os.urandom(32)).decode(),
        "SECURE_SSL_REDIRECT": "1",
        "SECURE_HSTS_SECONDS": "31536000",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
        "SECURE_HSTS_PRELOAD": "1",
        "SESSION_COOKIE_SECURE": "1",
        "CSRF_COOKIE_SECURE": "1",
        "VAR_DIR": str(tmp_path),
    }
    checked = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "no issues" in checked.stdout


def test_the_embedded_default_is_flagged_by_check_deploy(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "CREDENTIAL_ENCRYPTION_KEYS")}
    checked = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env={**env, "VAR_DIR": str(tmp_path)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert checked.returncode != 0
    assert "SECRET_KEY" in checked.stdout + checked.stderr


@pytest.mark.django_db
def test_every_model_change_has_its_migration():
    from django.core.management import call_command

    call_command("makemigrations", "--check", "--dry-run", verbosity=0)  # exits non-zero when one is missing
