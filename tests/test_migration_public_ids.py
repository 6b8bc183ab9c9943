"""Migrations ``accounts 0001`` and ``ai_jobs 0008``: users who existed before public
ids get one, and what named a user by the integer key (``user`` targets of jobs,
snapshots, outputs, notices; recommendations' action targets; snapshots' learner)
names them by it: run for real on a database of its own with rows in it."""

from __future__ import annotations

import json

import psycopg
import pytest
from django.db import connection

from tests.support.migrations import migrate

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_old_users_get_public_ids_and_their_user_targets_are_named_by_them(tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("a database of its own on the PostgreSQL server")
    db = connection.settings_dict
    admin = f"postgresql://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/postgres"
    name = f"{db['NAME']}_public_ids"
    url = admin.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        migrate(url, tmp_path)
        migrate(url, tmp_path, "accounts", "zero")  # back to before public ids (ai_jobs 0008 with it)
        with psycopg.connect(url, autocommit=True) as conn:
            user = conn.execute(
                "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, "
                "is_active, date_joined) VALUES ('!', false, 'old.name', '', '', 'old@example.com', false, true, "
                "now()) RETURNING id"
            ).fetchone()[0]
            payload = {
                "learner": {"userId": str(user), "username": "old.name"},
                "target": {"type": "user", "id": str(user)},
            }
            conn.execute(
                "INSERT INTO ai_job_snapshot (id, user_id, target_type, target_id, schema_version, payload, created_at, "
                "expires_at) VALUES ('snap_old', %s, 'user', %s, 'v1', %s, now(), now())",
                [user, str(user), json.dumps(payload)],
            )
            conn.execute(
                "INSERT INTO ai_runtime_job (id, user_id, job_type, target_type, target_id, status, priority, "
                "api_key_mode, model_provider, model_name, attempt_no, params, cancel_requested, retry_count, "
                "max_retry_count, timeout_seconds, available_at, created_at, updated_at) VALUES "
                "('job_old', %s, 'next_action_planning', 'user', %s, 'pending', 0, 'platform_key', 'deepseek', "
                "'deepseek-chat', 0, '{}', false, 0, 3, 120, now(), now(), now())",
                [user, str(user)],
            )
            conn.execute(
                "INSERT INTO ai_next_action_recommendation (id, user_id, job_id, target_type, target_id, created_at, "
                "position, action_type, title, description, priority, estimated_minutes, action_target_type, "
                "action_target_id) VALUES ('rcm_old', %s, 'job_old', 'user', %s, now(), 0, 'review', 't', 'd', 1, 5, "
                "'user', %s)",
                [user, str(user), str(user)],
            )
        migrate(url, tmp_path)
        with psycopg.connect(url, autocommit=True) as conn:
            (public_id,) = conn.execute("SELECT public_id FROM accounts_account WHERE user_id = %s", [user]).fetchone()
            assert public_id.startswith("usr_")
            assert conn.execute("SELECT target_id FROM ai_runtime_job").fetchone() == (public_id,)
            assert conn.execute("SELECT target_id, action_target_id FROM ai_next_action_recommendation").fetchone() == (
                public_id,
                public_id,
            )
            snapshot_target, snapshot = conn.execute("SELECT target_id, payload FROM ai_job_snapshot").fetchone()
            assert snapshot_target == public_id
            assert snapshot["learner"] == {"userId": public_id} and snapshot["target"]["id"] == public_id
            assert "old.name" not in json.dumps(snapshot)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
