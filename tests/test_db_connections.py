"""Database connections: Celery tasks keep their connection from task to task
(Celery's Django fix-up would open one per task), and one the database dropped costs no
task; the health check before a connection is reused costs no round trip; a statement
run again is prepared."""

from __future__ import annotations

import datetime
import json
import time

import psycopg
import pytest
from celery.fixups.django import DjangoWorkerFixup
from celery.signals import task_postrun, task_prerun
from django.conf import settings
from django.db import connection

from config.celery import app
from config.sql import fetch
from learning.queries import SNAPSHOT_OF_USER


def _another_connection() -> psycopg.Connection:
    """A connection of the test's own to the test database, beside Django's."""
    admin = connection.settings_dict
    return psycopg.connect(
        host=admin["HOST"], port=admin["PORT"] or 5432, user=admin["USER"], password=admin["PASSWORD"] or None,
        dbname=admin["NAME"], autocommit=True,
    )  # fmt: skip


def _drop_backend(pid: int) -> bool:
    """Drop a backend from another connection, as a database restart would."""
    with _another_connection() as conn:
        if not conn.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]:
            return False
        # Gone once it has sent its goodbye and exited, as after a restart (pg_ctl waits for that).
        deadline = time.monotonic() + 5
        while conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
            assert time.monotonic() < deadline, f"backend {pid} still there"
            time.sleep(0.01)
        return True


class _Task:
    class request:  # a worker's task request, not an eager one
        is_eager = False


def _run_task(query: str) -> int:
    task_prerun.send(sender=_Task, task_id="t", task=_Task)
    try:
        with connection.cursor() as cursor:
            cursor.execute(query)
            return cursor.fetchone()[0]
    finally:
        task_postrun.send(sender=_Task, task_id="t", task=_Task)


@pytest.mark.django_db(transaction=True)
def test_celery_tasks_keep_their_connection_and_a_dropped_one_costs_no_task():
    fixup = DjangoWorkerFixup(app)  # what a worker installs at start
    fixup.install()
    try:
        pids = {_run_task("SELECT pg_backend_pid()") for _ in range(20)}
        assert len(pids) == 1  # one connection for twenty tasks, not one each
        assert _drop_backend(pids.pop())
        # The next task finds it dropped (the health check) and connects again.
        assert _run_task("SELECT 1") == 1
        assert len({_run_task("SELECT pg_backend_pid()") for _ in range(5)}) == 1
    finally:
        task_prerun.disconnect(fixup.on_task_prerun)
        task_postrun.disconnect(fixup.on_task_postrun)


def _copy_the_one_row(model: type, copies: int) -> None:
    """``copies`` more rows of a table that holds one, in one statement, their ids made unique."""
    columns = [field.column for field in model._meta.concrete_fields]
    copied = ", ".join("id || '-' || i" if column == "id" else column for column in columns)
    table = model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) SELECT {copied} FROM {table}, generate_series(1, %s) AS i",
            [copies],
        )


def _last_query_of(pid: int) -> str:
    with _another_connection() as conn:
        return conn.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_the_health_check_of_an_idle_connection_costs_no_round_trip_and_still_finds_a_dropped_one():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid() /* health-check-marker */")
        pid = cursor.fetchone()[0]
    assert connection.is_usable()
    # The backend's last statement is still ours: the check sent no SELECT 1.
    assert "health-check-marker" in _last_query_of(pid)
    assert _drop_backend(pid)
    assert not connection.is_usable()
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone()[0] == 1


@pytest.mark.django_db(transaction=True)
def test_a_statement_run_again_is_prepared_so_postgresql_plans_it_no_more():
    threshold = settings.DATABASES["default"]["OPTIONS"].get("prepare_threshold")
    assert threshold is not None  # DB_PREPARED_STATEMENTS is on by default
    for _ in range(threshold + 2):
        [(document,)] = fetch(
            SNAPSHOT_OF_USER,
            {"user_id": 1, "found": False, "timezone": "UTC", "today": datetime.date(2026, 12, 1),
             "generated_at": "2026-12-01T00:00:00Z", "learner": "{}", "target": "{}"},
        )  # fmt: skip
        assert '"targetFound" : false' in document
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans + custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%learningSnapshotVersion%"],
        )
        [(executions,)] = cursor.fetchall()
    assert executions >= 2  # run as a prepared statement, not parsed and planned anew


@pytest.mark.django_db(transaction=True)
def test_the_prepared_claims_generic_plan_finds_its_rows_by_index_not_by_a_scan_of_the_queue():
    """Once prepared, PostgreSQL may run a statement with a generic plan, made without
    the parameters' values (the claim's LIMIT among them). ``id IN (SELECT id FROM
    picked)`` was then planned as a hash join over a scan of every pending row (its
    time growing with the queue); the claims now name their rows so that even the
    generic plan looks them up by index."""
    from ai_jobs import services
    from ai_jobs.models import AiRuntimeJob
    from tests.support.factories import JobFactory

    # A queue of copies of one job, big enough that a scan is no plan's choice.
    JobFactory()
    _copy_the_one_row(AiRuntimeJob, 5000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE ai_runtime_job")
    for _ in range(settings.DATABASES["default"]["OPTIONS"]["prepare_threshold"] + 1):
        services.job_claim(job_types=["learning_state_analysis"], limit=1, instance_id="runtime-1")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, parameter_types::text[] FROM pg_prepared_statements WHERE statement LIKE 'WITH picked%%'"
        )
        [(name, types)] = cursor.fetchall()
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            values = {"timestamp with time zone": "now()", "bigint": "1", "integer": "1", "smallint": "1",
                      "boolean": "false", "text[]": "ARRAY['learning_state_analysis']"}  # fmt: skip
            arguments = ", ".join(values.get(kind, "'learning_state_analysis'") for kind in types)
            cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE {name}({arguments})")
            plan = json.dumps(cursor.fetchone()[0])
        finally:
            cursor.execute("RESET plan_cache_mode")
    assert '"Relation Name": "ai_runtime_job"' in plan
    assert '"Node Type": "Seq Scan"' not in plan, plan


@pytest.mark.django_db(transaction=True)
def test_a_tenant_with_more_tasks_than_a_statement_may_bind_parameters_is_deleted():
    """Bound on the server, a statement takes at most 65,535 parameters. The deletion
    collector asks for the tasks' answers by the ids of all the tenant's tasks at once
    unless the backend says how many fit (Django 5.2 assumes no limit on PostgreSQL)."""
    from asynch.models import AsynchTask, Tenant

    tenant = Tenant.objects.create(name="many")
    AsynchTask.objects.create(tenant=tenant, model_name="m")
    _copy_the_one_row(AsynchTask, 66_000)
    tenant.delete()
    assert not AsynchTask.objects.exists()
    assert connection.ops.bulk_batch_size(["task"], [None] * 70_000) == 65_535
