"""Heartbeats as HOT updates, and the job table kept as a queue table.

A heartbeat rewrites ``lock_until``; while an index covered it, no heartbeat could be a
heap-only (HOT) update: each wrote a new entry into every index of the table and left
work for vacuum. No query needs that index (the reaper, the dashboard and ``/metrics``
find leased rows by ``ai_job_leased``, then read the lease there), so it goes.

On PostgreSQL the table also leaves room on each page (``fillfactor``), so the new
version of a row finds space beside the old one, and autovacuum visits it after a small
share of its rows changed rather than the default fifth of the table, as a queue whose
live part is small and whose rows churn needs. SQLite has neither setting: nothing to do there.
"""

from django.db import migrations

QUEUE_TABLE_SETTINGS = """ALTER TABLE ai_runtime_job SET (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_analyze_threshold = 1000,
    autovacuum_vacuum_cost_delay = 1
)"""

DEFAULT_TABLE_SETTINGS = """ALTER TABLE ai_runtime_job RESET (
    fillfactor,
    autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor,
    autovacuum_analyze_threshold,
    autovacuum_vacuum_cost_delay
)"""


class PostgreSQLOnlySQL(migrations.RunSQL):
    """``RunSQL`` that runs on PostgreSQL and is a no-op on any other database."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    dependencies = [
        ("ai_jobs", "0010_operator_control"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="airuntimejob", name="ai_job_lock_until"),
        PostgreSQLOnlySQL(QUEUE_TABLE_SETTINGS, reverse_sql=DEFAULT_TABLE_SETTINGS),
    ]
