"""model-asynch with real Celery worker processes (``celery -A config worker``
subprocesses on the Redis broker of the test run, against the test database):
many processes never run one task twice nor pass ``maxConcurrency``, and a worker
killed with SIGKILL while holding a slot gives the slot back after its lease, its
task retried."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter

import pytest
from django.utils import timezone

from asynch import services, worker
from asynch.models import AsynchModelStat, AsynchTask, TaskState
from asynch.semaphore import semaphore_key
from tests.support.asynch_fixtures import get_semaphore, make_model, model_server_fixture, tenant_client  # noqa: F401
from tests.support.celery_workers import kick, needs_postgres_and_redis, workers_fixture  # noqa: F401  (fixtures)
from tests.support.runtime_fixtures import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("needs_postgres_and_redis"),
]


def test_two_worker_processes_run_200_tasks_each_once_never_above_max_concurrency(workers, model_server):
    model_server.behaviour = lambda call, i: (200, {"n": call.json["n"]}, 0.02)
    make_model(base_url=model_server.url, max_concurrency=3, queue_limit=0)
    biz = tenant_client("biz")
    # Two call threads each: neither process alone can take all three slots.
    workers.start("w1", ASYNCH_WORKER_CONCURRENCY="2")
    workers.start("w2", ASYNCH_WORKER_CONCURRENCY="2")
    workers.wait_ready()
    ids = [biz.create_task("model-service", {"n": n}).json()["taskId"] for n in range(200)]
    kick(2)
    wait_for(
        lambda: AsynchTask.objects.filter(id__in=ids, state=TaskState.SUCCEEDED).count() == 200,
        timeout=60,
        what="200 tasks to succeed",
    )
    seen = Counter(call.json["n"] for call in model_server.calls)
    assert sorted(seen) == list(range(200)) and set(seen.values()) == {1}  # every task called exactly once
    assert 2 <= model_server.max_in_flight <= 3
    assert set(AsynchTask.objects.filter(id__in=ids).values_list("attempt_no", flat=True)) == {1}
    processes = {locked_by.rsplit(":", 1)[0] for locked_by in AsynchTask.objects.values_list("locked_by", flat=True)}
    assert len(processes) == 2, processes  # both worker processes claimed tasks
    assert AsynchModelStat.objects.get().request_count == 200 == len(model_server.calls)
    assert get_semaphore().holders(semaphore_key(biz.tenant.id, "model-service")) == 0


def test_a_worker_killed_holding_a_slot_gives_it_back_after_its_lease_and_the_task_is_retried(
    workers, model_server, settings
):
    lease = 1.5
    settings.ASYNCH_LEASE_SECONDS = lease
    called, release = threading.Event(), threading.Event()

    def behaviour(call, index):
        if index == 0:
            called.set()
            release.wait(15)  # hold the first call until the worker is dead
        return 200, {"attempt": index}, 0

    model_server.behaviour = behaviour
    make_model(base_url=model_server.url, max_concurrency=1, retry_times=2, retry_queue_max_seconds=0)
    biz = tenant_client("biz")
    key = semaphore_key(biz.tenant.id, "model-service")
    process = workers.start("doomed", ASYNCH_LEASE_SECONDS=str(lease))
    workers.wait_ready()
    task_id = biz.create_task("model-service").json()["taskId"]
    kick()
    assert called.wait(30), "the worker never called the model"
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    killed_at = time.monotonic()
    try:
        assert get_semaphore().holders(key) == 1  # the dead worker's slot is still taken...
        task = AsynchTask.objects.get(id=task_id)
        assert task.state == TaskState.RUNNING
        wait_for(lambda: get_semaphore().holders(key) == 0, timeout=lease + 3, what="the slot's lease to lapse")
        assert time.monotonic() - killed_at > lease / 3  # ...until its lease ran out, not at once
    finally:
        release.set()
    wait_for(
        lambda: AsynchTask.objects.get(id=task_id).lease_until < timezone.now(), timeout=lease + 3, what="the lease"
    )
    totals = services.tasks_clean()
    assert totals["failedStuck"] == 1 and totals["retried"] == 1
    task = AsynchTask.objects.get(id=task_id)
    assert task.state == TaskState.QUEUED and task.retry_count == 1
    assert worker.tasks_drain(budget_seconds=20)["succeeded"] == 1
    task = AsynchTask.objects.get(id=task_id)
    assert task.state == TaskState.SUCCEEDED and task.attempt_no == 2
    assert len(model_server.calls) == 2 == AsynchModelStat.objects.get().request_count
