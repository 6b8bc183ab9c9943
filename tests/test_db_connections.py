"""Database connections (issue 12): Celery tasks keep their connection from task to task
(Celery's Django fix-up would open one per task), and one the database dropped costs no
task."""

from __future__ import annotations

import psycopg
import pytest
from celery.fixups.django import DjangoWorkerFixup
from celery.signals import task_postrun, task_prerun
from django.db import connection

from config.celery import app


def _drop_backend(pid: int) -> bool:
    """Drop a backend from another connection, as a database restart would."""
    admin = connection.settings_dict
    with psycopg.connect(
        host=admin["HOST"], port=admin["PORT"] or 5432, user=admin["USER"], password=admin["PASSWORD"] or None,
        dbname=admin["NAME"], autocommit=True,
    ) as conn:  # fmt: skip
        return bool(conn.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0])


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
