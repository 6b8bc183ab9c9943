"""Migrations ``accounts 0002``-``0004`` on a database that already holds accounts whose
names are one under the new rule (``ivan`` and ``Ivan`` made in the admin, ``JUDY``
that registration let through beside ``judy`` from a fullwidth J), run for real with
``manage.py migrate``, on a SQLite file and on a PostgreSQL database of its own: the
oldest of each keeps the key, the younger ones keep their names and no key, every
other account gets its key, and the key is unique from then on."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from tests.support.security.accounts import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

# (username, date joined): inserted in this order, so the ids rise with it.
USERS = [
    ("ivan", "2024-01-01"),
    ("judy", "2024-01-02"),
    ("Ivan", "2024-02-01"),
    ("JUDY", "2024-02-02"),
    ("kim", "2024-03-01"),
]


def migrate(url: str, tmp_path: Path, *target: str) -> None:
    env = {**os.environ, "DATABASE_URL": url, "VAR_DIR": str(tmp_path)}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", *target, "-v0"], cwd=ROOT, env=env, check=True, capture_output=True
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, object]]:
    """A database of its own: its URL and a DB-API connect()."""
    if request.param == "sqlite":
        path = tmp_path / "migration.sqlite3"
        yield f"sqlite:///{path}", lambda: sqlite3.connect(path, isolation_level=None)
        return
    if connection.vendor != "postgresql":
        pytest.skip("a database of its own on the PostgreSQL server")
    db = connection.settings_dict
    admin = f"postgresql://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/postgres"
    name = f"{db['NAME']}_usernames"
    url = admin.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url, lambda: psycopg.connect(url, autocommit=True)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_accounts_that_already_share_a_name_keep_it_and_the_oldest_gets_the_key(database, tmp_path):
    url, connect = database
    marker = "%s" if url.startswith("postgres") else "?"
    migrate(url, tmp_path)
    migrate(url, tmp_path, "accounts", "0001")  # back to before username keys
    conn = connect()
    try:
        ids = {}
        for n, (username, joined) in enumerate(USERS):
            ids[username] = conn.execute(
                "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, "
                f"is_active, date_joined) VALUES ('!', {marker}, {marker}, '', '', '', {marker}, {marker}, {marker}) "
                "RETURNING id",
                [False, username, False, True, f"{joined} 00:00:00+00:00"],
            ).fetchone()[0]
            if username != "kim":  # one made without its account (bulk_create): the backfill makes it
                conn.execute(
                    f"INSERT INTO accounts_account (user_id, public_id, created_at) VALUES ({marker}, {marker}, "
                    f"{marker})",
                    [ids[username], f"usr_migration{n}", f"{joined} 00:00:00+00:00"],
                )
    finally:
        conn.close()

    migrate(url, tmp_path)

    conn = connect()
    try:
        keys = dict(conn.execute("SELECT user_id, username_key FROM accounts_account").fetchall())
        assert keys == {
            ids["ivan"]: "ivan",
            ids["judy"]: "judy",
            ids["Ivan"]: None,
            ids["JUDY"]: None,
            ids["kim"]: "kim",
        }
        names = {row[0] for row in conn.execute("SELECT username FROM auth_user").fetchall()}
        assert names == {username for username, _ in USERS}  # nobody renamed
        with pytest.raises((sqlite3.IntegrityError, psycopg.errors.UniqueViolation)):
            conn.execute(
                f"UPDATE accounts_account SET username_key = {marker} WHERE user_id = {marker}", ["ivan", ids["Ivan"]]
            )
    finally:
        conn.close()
