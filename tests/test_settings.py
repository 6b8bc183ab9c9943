"""The production setup is the same code with the environment set."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def production_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        # check --deploy connects to neither: nothing listens on these ports.
        "DATABASE_URL": "postgres://aijobs:secret@127.0.0.1:9/aijobs",
        "REDIS_URL": "redis://127.0.0.1:9/0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "api.example.com",
        "RUNTIME_SERVICE_TOKENS": secrets.token_urlsafe(32),
        "CREDENTIAL_ENCRYPTION_KEYS": "k1:" + base64.b64encode(os.urandom(32)).decode(),
        "METRICS_TOKEN": secrets.token_urlsafe(32),
        "SECURE_SSL_REDIRECT": "1",
        "SECURE_HSTS_SECONDS": "31536000",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
        "SECURE_HSTS_PRELOAD": "1",
        "SESSION_COOKIE_SECURE": "1",
        "CSRF_COOKIE_SECURE": "1",
        "VAR_DIR": str(tmp_path),
        **extra,
    }


def check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_check_deploy_is_clean_with_the_production_environment(tmp_path):
    checked = check_deploy(production_env(tmp_path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "no issues" in checked.stdout


def test_check_deploy_is_clean_on_several_machines_with_s3(tmp_path):
    checked = check_deploy(
        production_env(tmp_path, DEPLOYMENT_MACHINES="3", ASYNCH_RESULT_STORAGE="s3", ASYNCH_S3_BUCKET="results")
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_check_deploy_warns_of_postgresql_without_redis(tmp_path):
    env = production_env(tmp_path)
    env.pop("REDIS_URL")
    env.pop("ASYNCH_SEMAPHORE_REDIS_URL", None)
    checked = check_deploy(env)
    assert checked.returncode != 0
    assert "(ops.W001) PostgreSQL is configured without REDIS_URL" in checked.stderr, checked.stderr


def test_check_deploy_warns_of_local_result_files_on_several_machines(tmp_path):
    checked = check_deploy(production_env(tmp_path, DEPLOYMENT_MACHINES="2"))
    assert checked.returncode != 0
    assert (
        "(ops.W002) DEPLOYMENT_MACHINES is 2 but model-asynch stores results on this machine's disk" in checked.stderr
    )
    assert "ops.W001" not in checked.stderr


def test_check_deploy_refuses_s3_without_a_bucket(tmp_path):
    checked = check_deploy(production_env(tmp_path, ASYNCH_RESULT_STORAGE="s3", ASYNCH_DOWNLOAD_URL_MAX_AGE="864000"))
    assert "(ops.E002)" in checked.stderr and "(ops.W003)" in checked.stderr, checked.stderr


def test_the_embedded_default_is_flagged_by_check_deploy(tmp_path):
    """make run's setup (DEBUG on, no keys): it starts, and check --deploy says what it lacks."""
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "CREDENTIAL_ENCRYPTION_KEYS")}
    checked = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env={**env, "DEBUG": "true", "VAR_DIR": str(tmp_path)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert checked.returncode != 0
    output = checked.stdout + checked.stderr
    assert "(security.W009) Your SECRET_KEY" in output and "(credentials.W001)" in output, output


@pytest.mark.django_db
def test_every_model_change_has_its_migration():
    from django.core.management import call_command

    call_command("makemigrations", "--check", "--dry-run", verbosity=0)  # exits non-zero when one is missing


def test_var_dir_set_in_the_env_file_is_honoured(tmp_path):
    """``.env`` is read before any setting: a VAR_DIR written there decides where the
    embedded default keeps its files. The settings package is copied next to a ``.env``
    of the test's own (they read the one beside the package), never the repository's."""
    shutil.copytree(ROOT / "config", tmp_path / "config", ignore=shutil.ignore_patterns("__pycache__"))
    var_dir = tmp_path / "from-env-file"
    (tmp_path / ".env").write_text(f"VAR_DIR={var_dir}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("VAR_DIR", "DATABASE_URL")}
    shown = subprocess.run(
        [sys.executable, "-c", "from config import settings; print(settings.VAR_DIR); print(settings.DATABASES['default']['NAME'])"],
        cwd=tmp_path, env={**env, "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == [str(var_dir), str(var_dir / "db.sqlite3")]


CONTRACT_DEFAULTS = {
    "ALLOW_REGISTRATION": False,
    "REGISTRATION_THROTTLE_RATE": "20/hour",
    "AUTH_THROTTLE_RATE": "10/min",
    "AUTH_ADDRESS_THROTTLE_RATE": "60/min",
    "AUTH_FAILURE_THROTTLE_RATE": "30/min",
    "CREDENTIAL_TEST_THROTTLE_RATE": "10/hour",
    "USER_THROTTLE_RATE": "60/min",
    "RUNTIME_THROTTLE_RATE": "300/min",
    "AI_JOB_LOCK_SECONDS": 60,
    "AI_JOB_REAPER_INTERVAL_SECONDS": 15,
    "AI_ANALYSIS_ENABLED_BY_DEFAULT": False,
    "DEEPSEEK_BASE_URL": "https://api.deepseek.com",
    "DEEPSEEK_MODEL": "deepseek-chat",
    "PLATFORM_DAILY_TOKEN_BUDGET": 10_000_000,
    "PLATFORM_DAILY_COST_BUDGET_CENTS": 50_000,
    "PLATFORM_CIRCUIT_FAILURE_THRESHOLD": 10,
    "PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS": 2,
    "PLATFORM_TIMEZONE": "UTC",
    "LOG_FORMAT": "text",
    "RETENTION_INTERVAL_SECONDS": 3600,
    "AI_SNAPSHOT_RETENTION_DAYS": 7,
    "AI_JOB_RETENTION_DAYS": 90,
    "AI_NOTIFICATION_RETENTION_DAYS": 30,
    "ASYNCH_UNCLAIMED_RETENTION_SECONDS": 604_800,
    "AI_COUNTER_RETENTION_DAYS": 400,
    "ADMIN_LOGIN_FAILURE_LIMIT": 5,
    "ADMIN_LOGIN_COOLOFF_MINUTES": 15,
    "LEARNING_MAX_OBJECTS_PER_USER": 10_000,
    "DELIVERY_RETENTION_DAYS": 30,
    "APNS_ENDPOINT": "https://api.push.apple.com",
    "FCM_ENDPOINT": "https://fcm.googleapis.com",
    "PUSH_CA_FILE": "",
    "PUSH_TTL_SECONDS": 86400,
    "PUSH_RETRY_BASE_SECONDS": 5.0,
    "PUSH_MAX_ATTEMPTS": 5,
    "PUSH_MAX_DEVICES_PER_USER": 20,
    "WEBHOOK_ALLOWED_HOSTS": [],
    "WEBHOOK_RETRY_SCHEDULE": "5s,5m,30m,2h,5h,10h,10h",
    "WEBHOOK_TIMEOUT_SECONDS": 15,
    "WEBHOOK_SECRET_OVERLAP_SECONDS": 86400,
    "WEBHOOK_DISABLE_AFTER_DAYS": 5,
}


def test_every_setting_left_unset_takes_its_documented_default(tmp_path):
    """The settings read with none of these in the environment (nor a ``.env``: the
    package is copied beside an empty one) hold the defaults the API guide promises."""
    shutil.copytree(ROOT / "config", tmp_path / "config", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / ".env").write_text("")
    env = {k: v for k, v in os.environ.items() if k not in CONTRACT_DEFAULTS and k not in ("DEBUG", "DATABASE_URL")}
    names = ", ".join(CONTRACT_DEFAULTS)
    shown = subprocess.run(
        [sys.executable, "-c", f"import json; from config import settings as s; print(json.dumps({{n: getattr(s, n) for n in {names.split(', ')!r}}}))"],
        cwd=tmp_path, env={**env, "PYTHONPATH": str(tmp_path), "VAR_DIR": str(tmp_path / "var")},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout.strip().splitlines()[-1]) == CONTRACT_DEFAULTS


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RUNTIME_THROTTLE_RATE", "300 per minute"),
        ("AUTH_FAILURE_THROTTLE_RATE", "0/min"),
        ("USER_THROTTLE_RATE", "60/fortnight"),
        ("WEBHOOK_RETRY_SCHEDULE", "5s,5 minutes"),
    ],
)
def test_a_rate_or_schedule_that_cannot_be_read_stops_the_process_at_its_start(tmp_path, name, value):
    """Read once as the settings load: never a 500 on the first throttled request, nor a
    delivery that fails for good at its first retry."""
    checked = check_deploy(production_env(tmp_path, **{name: value}))
    assert checked.returncode != 0
    assert f"ImproperlyConfigured: {name}: " in checked.stderr, checked.stderr[-2000:]
