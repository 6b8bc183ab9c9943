"""``update.sql`` at the repository's root: model-asynch's tables for a first deployment
that runs SQL by hand. It is what the asynch migrations create: a file that no longer
matches them fails here, and run on an empty database it makes the tables the models
have (columns, types, indexes, constraints)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from django.db import connection

from asynch.management.commands.asynch_ddl import asynch_ddl

pytestmark = [pytest.mark.django_db]

UPDATE_SQL = Path(__file__).resolve().parent.parent / "update.sql"

_COLUMNS = (
    "SELECT table_name, column_name, data_type, is_nullable, character_maximum_length FROM "
    "information_schema.columns WHERE table_schema = 'public' AND table_name LIKE 'asynch\\_%' ORDER BY 1, 2"
)
_INDEXES = "SELECT tablename, indexdef FROM pg_indexes WHERE tablename LIKE 'asynch\\_%' ORDER BY 1, 2"
_CONSTRAINTS = (
    "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
    "WHERE conrelid::regclass::text LIKE 'asynch\\_%' ORDER BY 1, 2"
)


def _postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("update.sql is PostgreSQL's DDL")


def test_update_sql_is_what_the_migrations_make_now(settings):
    _postgresql()
    settings.MIGRATION_MODULES = {}  # the suite builds its database without them; this reads them
    assert UPDATE_SQL.read_text() == asynch_ddl(), (
        "update.sql is stale: python manage.py asynch_ddl --output update.sql"
    )


def test_update_sql_on_an_empty_database_makes_the_models_tables():
    _postgresql()
    db = connection.settings_dict
    admin = f"postgresql://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/postgres"
    name = f"{db['NAME']}_update_sql"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(admin.rsplit("/", 1)[0] + "/" + name, autocommit=True) as fresh:
            fresh.execute(UPDATE_SQL.read_text())
            made = [fresh.execute(sql).fetchall() for sql in (_COLUMNS, _INDEXES, _CONSTRAINTS)]
        with connection.cursor() as cursor:
            expected = []
            for sql in (_COLUMNS, _INDEXES, _CONSTRAINTS):
                cursor.execute(sql)
                expected.append([tuple(row) for row in cursor.fetchall()])
        assert [[tuple(row) for row in rows] for rows in made] == expected
        assert {row[0] for row in made[0]} == {
            "asynch_tenant", "asynch_tenant_api_key", "asynch_models", "asynch_task", "asynch_task_answer",
            "asynch_model_stat",
        }  # fmt: skip
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
