"""PgBouncer in transaction mode in front of PostgreSQL (docs/operations/production.md, A connection pooler in front of PostgreSQL): a
real ``pgbouncer`` (Debian's, 1.18, which carries no prepared statements) with two
server connections for many client ones, and gunicorn's threads talking through it.
With ``DB_TRANSACTION_POOLER=1`` every call succeeds, nothing outliving a transaction."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
import requests
from django.db import connection

from tests.support.runtime_fixtures import ROOT, free_port, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PGBOUNCER = "/usr/sbin/pgbouncer"
TOKEN = "pgbouncer-runtime-token-0123456789abcdef"
THREADS = 8
CALLS = 40


@pytest.fixture
def pgbouncer() -> Iterator[str]:
    """A private pgbouncer on a free port, as user postgres (it will not run as root);
    yields the database URL through it."""
    if connection.vendor != "postgresql" or not Path(PGBOUNCER).exists():
        pytest.skip("needs PostgreSQL and Debian's pgbouncer (make test installs it)")
    db = connection.settings_dict
    port = free_port()
    home = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    (home / "users.txt").write_text(f'"{db["USER"]}" ""\n')
    (home / "pgbouncer.ini").write_text(
        f"[databases]\n{db['NAME']} = host={db['HOST'] or '127.0.0.1'} port={db['PORT'] or 5432} dbname={db['NAME']}\n"
        f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {home}/users.txt\npool_mode = transaction\n"
        "default_pool_size = 2\nmax_client_conn = 200\nserver_reset_query =\n"
        f"logfile = {home}/pgbouncer.log\npidfile = {home}/pgbouncer.pid\n"
    )
    shutil.chown(home, "postgres")
    home.chmod(0o755)
    process = subprocess.Popen(["runuser", "-u", "postgres", "--", PGBOUNCER, str(home / "pgbouncer.ini")])
    url = f"postgres://{db['USER']}@127.0.0.1:{port}/{db['NAME']}"

    def up() -> bool:
        assert process.poll() is None, (home / "pgbouncer.log").read_text()[-2000:]
        try:
            psycopg.connect(url.replace("postgres://", "postgresql://"), connect_timeout=1).close()
        except Exception:
            return False
        return True

    try:
        wait_for(up, timeout=20, every=0.1, what="pgbouncer")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)


def answers_through(database_url: str, tmp_path: Path, **env: str) -> Counter[int]:
    """gunicorn (one worker, THREADS threads, persistent connections) on ``database_url``;
    THREADS clients each make CALLS identical runtime polls: how it answered."""
    port = free_port()
    environment = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DB_CONN_MAX_AGE": "60",
        "RUNTIME_SERVICE_TOKENS": TOKEN,
        "RUNTIME_THROTTLE_RATE": "1000000/min",
        "VAR_DIR": str(tmp_path),
        "LOG_LEVEL": "ERROR",
        **env,
    }
    environment.pop("REDIS_URL", None)  # the database is what is under test
    log = tmp_path / "gunicorn.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi", "-c", "config/gunicorn.py", "--bind",
             f"127.0.0.1:{port}", "--workers", "1", "--threads", str(THREADS), "--log-level", "warning"],
            cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/internal/runtime/jobs/poll"
    headers = {"Authorization": f"Bearer {TOKEN}", "x-runtime-instance-id": "rt-pool"}
    body = {"capabilities": ["learning_state_analysis"], "limit": 5}

    def poll(_: int) -> int:
        with requests.Session() as session:
            return session.post(url, json=body, headers=headers, timeout=30).status_code

    try:
        wait_for(lambda: _listening(url, server, log), timeout=30, every=0.2, what="gunicorn")
        with ThreadPoolExecutor(THREADS) as pool:
            return Counter(pool.map(poll, range(THREADS * CALLS)))
    finally:
        server.terminate()
        server.wait(timeout=15)


def _listening(url: str, server: subprocess.Popen[bytes], log: Path) -> bool:
    assert server.poll() is None, log.read_text()[-2000:]
    try:
        requests.get(url.split("/internal")[0] + "/healthz", timeout=1)
    except requests.RequestException:
        return False
    return True


def test_every_call_succeeds_through_a_transaction_pooler_with_db_transaction_pooler(pgbouncer, tmp_path):
    assert answers_through(pgbouncer, tmp_path, DB_TRANSACTION_POOLER="1") == {200: THREADS * CALLS}


def test_db_transaction_pooler_turns_off_what_would_outlive_a_transaction(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": "postgres://u@127.0.0.1:9/db",
        "DB_TRANSACTION_POOLER": "1",
        "VAR_DIR": str(tmp_path),
    }
    printed = subprocess.run(
        [sys.executable, "-c", "import django, json; django.setup(); from django.conf import settings; "
         "d = settings.DATABASES['default']; print(json.dumps([d['DISABLE_SERVER_SIDE_CURSORS'], "
         "d['OPTIONS'].get('prepare_threshold', 'unset'), d['OPTIONS'].get('server_side_binding', False)]))"],
        cwd=ROOT, env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"}, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    # No WITH HOLD cursors for iterator(), no prepared statements, parameters bound client-side.
    assert json.loads(printed.strip().splitlines()[-1]) == [True, None, False]
