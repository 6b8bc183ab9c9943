"""Heartbeats are HOT updates on PostgreSQL: a running job's heartbeat rewrites its row
without touching any index of the job table (no index covers a column it changes), which
PostgreSQL's own statistics (``pg_stat_user_tables``) show; and the migration that made
them so leaves the queue table room on its pages and autovacuum settings of its own,
and undoes both."""

from __future__ import annotations

import datetime as dt
import importlib

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from ai_jobs import transitions
from ai_jobs.models import AiRuntimeJob
from tests.support.factories import JobFactory
from tests.support.migrations import migrate

HEARTBEATS = 40
# The test database is made from the models (--no-migrations): the storage parameters
# are the migration's own statement, applied here as it applies them.
QUEUE_TABLE_SETTINGS = importlib.import_module("ai_jobs.migrations.0011_job_table_heartbeats_hot").QUEUE_TABLE_SETTINGS


def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("HOT updates and table storage parameters are PostgreSQL's")


def _job_table_updates() -> tuple[int, int]:
    """The job table's (updates, HOT updates) so far, this backend's own included: its
    pending counts are flushed once it is idle (``pg_stat_force_next_flush``), and the
    statistics snapshot of the transaction is dropped before they are read."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'ai_runtime_job'::regclass"
        )
        updates, hot = cursor.fetchone()
    return updates, hot


@pytest.mark.django_db(transaction=True)
def test_the_heartbeats_of_a_running_job_are_hot_updates():
    _postgresql_only()
    with connection.cursor() as cursor:
        cursor.execute(QUEUE_TABLE_SETTINGS)
    # A few jobs about, so the heartbeats' row shares its page with others as in a queue.
    jobs = [JobFactory() for _ in range(5)]
    job = jobs[2]
    lease = dt.timedelta(seconds=60)
    now = timezone.now()
    AiRuntimeJob.objects.filter(id=job.id).update(
        status="locked", locked_by="rt-hot", locked_at=now, lock_until=now + lease, attempt_no=1
    )
    # The first heartbeat moves locked → running: status changes, an indexed column.
    assert transitions.heartbeat(job_id=job.id, instance_id="rt-hot", now=timezone.now(), lease=lease) is not None
    updates_before, hot_before = _job_table_updates()
    for _ in range(HEARTBEATS):  # each its own transaction (autocommit), as requests send them
        beat = transitions.heartbeat(job_id=job.id, instance_id="rt-hot", now=timezone.now(), lease=lease)
        assert beat is not None and beat.cancel_requested is False
    updates_after, hot_after = _job_table_updates()
    assert updates_after - updates_before == HEARTBEATS
    # All of them, but for one that finds its page full before PostgreSQL's next
    # opportunistic prune of it made room (an index on lock_until made it none at all).
    assert hot_after - hot_before >= HEARTBEATS * 0.9
    job.refresh_from_db()
    assert job.status == "running" and job.lock_until > now


@pytest.mark.django_db(transaction=True)
def test_no_index_of_the_job_table_covers_a_column_a_heartbeat_writes():
    _postgresql_only()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT a.attname FROM pg_index i "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = 'ai_runtime_job'::regclass"
        )
        indexed = {row[0] for row in cursor.fetchall()}
    # started_at and deadline_ms change on the first heartbeat only, with status.
    assert indexed.isdisjoint({"lock_until", "updated_at", "started_at", "deadline_ms"}), indexed


@pytest.mark.slow
@pytest.mark.django_db
def test_the_migration_gives_the_job_table_room_on_its_pages_and_queue_autovacuum_and_undoes_it(tmp_path):
    _postgresql_only()
    db = connection.settings_dict
    admin = f"postgresql://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/postgres"
    name = f"{db['NAME']}_hot_migration"
    url = admin.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')

    def table_state() -> tuple[dict[str, str], set[str]]:
        with psycopg.connect(url, autocommit=True) as conn:
            options = conn.execute("SELECT reloptions FROM pg_class WHERE oid = 'ai_runtime_job'::regclass").fetchone()[
                0
            ]
            indexes = {
                row[0] for row in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'ai_runtime_job'")
            }
        return dict(option.split("=", 1) for option in options or []), indexes

    try:
        migrate(url, tmp_path)
        options, indexes = table_state()
        assert int(options["fillfactor"]) < 100
        assert float(options["autovacuum_vacuum_scale_factor"]) < 0.2  # PostgreSQL's default
        assert float(options["autovacuum_analyze_scale_factor"]) < 0.1
        assert "ai_job_lock_until" not in indexes and "ai_job_leased" in indexes
        migrate(url, tmp_path, "ai_jobs", "0010")
        options, indexes = table_state()
        assert options == {} and "ai_job_lock_until" in indexes
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.slow
@pytest.mark.embedded
@pytest.mark.django_db
def test_the_migration_leaves_sqlite_as_it_was(tmp_path):
    url = f"sqlite:///{tmp_path / 'hot.sqlite3'}"
    migrate(url, tmp_path)
    migrate(url, tmp_path, "ai_jobs", "0010")
    migrate(url, tmp_path)
