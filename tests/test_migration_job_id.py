"""Migration ``ai_jobs 0006`` turns the outputs' and notices' CASCADE foreign key to
their job into a plain ``job_id`` and keeps the data: run for real on a database of
its own, migrated to 0005 with rows in it, then forward."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from tests.support.migrations import migrate

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_0006_keeps_every_output_and_notice_and_drops_only_the_foreign_key(tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("a database of its own on the PostgreSQL server")
    db = connection.settings_dict
    admin = f"postgresql://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/postgres"
    name = f"{db['NAME']}_migration"
    url = admin.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        migrate(url, tmp_path)  # every app as it is, then ai_jobs back before 0006 (so it reverses too)
        migrate(url, tmp_path, "ai_jobs", "0005")
        with psycopg.connect(url, autocommit=True) as conn:
            user = conn.execute(
                "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, "
                "is_active, date_joined) VALUES ('!', false, 'old', '', '', '', false, true, now()) RETURNING id"
            ).fetchone()[0]
            conn.execute(
                "INSERT INTO ai_runtime_job (id, user_id, job_type, target_type, target_id, status, priority, "
                "api_key_mode, model_provider, model_name, attempt_no, params, cancel_requested, retry_count, "
                "max_retry_count, timeout_seconds, available_at, created_at, updated_at, finished_at) VALUES "
                "('job_old', %s, 'learning_state_analysis', 'user', %s, 'succeeded', 0, 'platform_key', 'deepseek', "
                "'deepseek-chat', 1, '{}', false, 0, 3, 120, now(), now(), now(), now())",
                [user, str(user)],
            )
            conn.execute(
                "INSERT INTO ai_learning_analysis (id, user_id, job_id, target_type, target_id, created_at, summary, "
                "mastery_score, level, strengths, weaknesses, confidence) VALUES ('ana_old', %s, 'job_old', 'user', "
                "%s, now(), 'kept', 70, 'developing', '[]', '[]', 0.8)",
                [user, str(user)],
            )
            conn.execute(
                "INSERT INTO ai_notification (id, user_id, job_id, target_type, target_id, created_at, kind, "
                "job_type, title, message, data) VALUES ('ntf_old', %s, 'job_old', 'user', %s, now(), "
                "'job_succeeded', 'learning_state_analysis', 'Done', '', '{}')",
                [user, str(user)],
            )
        migrate(url, tmp_path)
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT id, job_id, summary FROM ai_learning_analysis").fetchall() == [
                ("ana_old", "job_old", "kept")
            ]
            assert conn.execute("SELECT job_id FROM ai_notification").fetchall() == [("job_old",)]
            foreign_keys = conn.execute(
                "SELECT conrelid::regclass::text FROM pg_constraint WHERE contype = 'f' "
                "AND confrelid = 'ai_runtime_job'::regclass"
            ).fetchall()
            # Only the job's own result and invocation logs still cascade from it (and its
            # lineage: retried from, rerun as, on the job table itself).
            assert sorted(row[0] for row in foreign_keys) == [
                "ai_invocation_log",
                "ai_runtime_job",
                "ai_runtime_job",
                "ai_runtime_result",
            ]
            conn.execute("DELETE FROM ai_runtime_job WHERE id = 'job_old'")
            assert conn.execute("SELECT count(*) FROM ai_learning_analysis").fetchone()[0] == 1
            assert (
                conn.execute(
                    "SELECT count(*) FROM pg_indexes WHERE tablename = 'ai_learning_analysis' AND indexdef LIKE '%(job_id)%'"
                ).fetchone()[0]
                == 2
            )  # the unique one and the lookup index, as before
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
