"""Unsafe by omission, refused: with ``DEBUG`` false every process, web,
Celery worker, beat and the reference runtime, exits at start naming the setting when
``SECRET_KEY`` is missing or the public development default, or when
``CREDENTIAL_ENCRYPTION_KEYS`` is unset; ``dev_bootstrap`` (its known passwords and
key) refuses to run; ``check --deploy`` is an error without ``METRICS_TOKEN``."""

from __future__ import annotations

import base64
import io
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from asynch.models import TenantApiKey
from tests.support.runtime_fixtures import ROOT, free_port

BIN = Path(sys.executable).parent
PROCESSES = {
    "web": [str(BIN / "gunicorn"), "config.wsgi", "-c", "config/gunicorn.py", "--workers", "1"],
    "worker": [str(BIN / "celery"), "-A", "config", "worker", "--pool", "threads", "--concurrency", "1"],
    "beat": [str(BIN / "celery"), "-A", "config", "beat"],
    "runtime": [sys.executable, "manage.py", "run_runtime"],
}
DEVELOPMENT_SECRET_KEY = "django-insecure-embedded-default-set-SECRET_KEY-in-production"  # public: in the source
GOOD_KEYS = "k1:" + base64.b64encode(os.urandom(32)).decode()
UNSAFE = {
    "no SECRET_KEY": ({"SECRET_KEY": None, "CREDENTIAL_ENCRYPTION_KEYS": GOOD_KEYS}, "SECRET_KEY is missing"),
    "the development SECRET_KEY": (
        {"SECRET_KEY": DEVELOPMENT_SECRET_KEY, "CREDENTIAL_ENCRYPTION_KEYS": GOOD_KEYS},
        "SECRET_KEY is missing or the development default",
    ),
    "no CREDENTIAL_ENCRYPTION_KEYS": (
        {"SECRET_KEY": secrets.token_urlsafe(50), "CREDENTIAL_ENCRYPTION_KEYS": None},
        "CREDENTIAL_ENCRYPTION_KEYS is unset",
    ),
}


def _env(tmp_path: Path, **values: str | None) -> dict[str, str]:
    env = {
        **os.environ,
        "DEBUG": "false",
        "VAR_DIR": str(tmp_path),
        # Nothing listens on these: a process that started would wait for them, not fail.
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{free_port()}/nothing",
        "CELERY_BROKER_URL": "memory://",
        "RUNTIME_API_URL": f"http://127.0.0.1:{free_port()}",
        "RUNTIME_SERVICE_TOKEN": "a-token",
        "RUNTIME_INSTANCE_ID": "rt-refused",
        "RUNTIME_CAPABILITIES": "learning_state_analysis",
        "PORT": str(free_port()),
    }
    for name, value in values.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def _run(command: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int | None, str]:
    """The exit code and output of ``command``; None when it was still running (it started)."""
    if command[0].endswith("gunicorn"):
        command = [*command, "--bind", f"127.0.0.1:{env['PORT']}"]
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout or b""
        return None, out.decode(errors="replace") if isinstance(out, bytes) else out
    return done.returncode, done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("unsafe", list(UNSAFE))
@pytest.mark.parametrize("process", list(PROCESSES))
def test_every_process_refuses_to_start_with_debug_false_and_an_unsafe_setting(process, unsafe, tmp_path):
    values, named = UNSAFE[unsafe]
    code, output = _run(PROCESSES[process], _env(tmp_path, **values), timeout=45)
    assert code is not None, f"{process} started with {unsafe}"
    assert code != 0 and named in output, output[-3000:]


def test_the_same_settings_are_fine_with_debug_on_and_production_values_with_it_off(tmp_path):
    development = _env(tmp_path, DEBUG="true", SECRET_KEY=None, CREDENTIAL_ENCRYPTION_KEYS=None)
    production = _env(tmp_path, SECRET_KEY=secrets.token_urlsafe(50), CREDENTIAL_ENCRYPTION_KEYS=GOOD_KEYS)
    for env in (development, production):
        code, output = _run([sys.executable, "manage.py", "check"], env)
        assert code == 0, output


def _deploy_env(tmp_path: Path, **extra: str | None) -> dict[str, str]:
    return _env(
        tmp_path,
        SECRET_KEY=secrets.token_urlsafe(50),
        CREDENTIAL_ENCRYPTION_KEYS=GOOD_KEYS,
        REDIS_URL="redis://127.0.0.1:9/0",
        ALLOWED_HOSTS="api.example.com",
        SECURE_SSL_REDIRECT="1",
        SECURE_HSTS_SECONDS="31536000",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="1",
        SECURE_HSTS_PRELOAD="1",
        SESSION_COOKIE_SECURE="1",
        CSRF_COOKIE_SECURE="1",
        **extra,
    )


def test_check_deploy_is_an_error_without_metrics_token(tmp_path):
    code, output = _run([sys.executable, "manage.py", "check", "--deploy"], _deploy_env(tmp_path, METRICS_TOKEN=None))
    assert code != 0 and "(ops.E003) METRICS_TOKEN is not set" in output, output
    code, output = _run(
        [sys.executable, "manage.py", "check", "--deploy"], _deploy_env(tmp_path, METRICS_TOKEN=secrets.token_hex(16))
    )
    assert code == 0 and "ops.E003" not in output, output


@pytest.mark.django_db
def test_dev_bootstrap_refuses_with_debug_false(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG"):
        call_command("dev_bootstrap", stdout=io.StringIO())
    assert not get_user_model().objects.exists()  # no admin/admin, no demo learner
    assert not TenantApiKey.objects.exists()  # no known tenant key
