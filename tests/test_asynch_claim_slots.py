"""A task shows state 1 only while a call holds a slot for it (contract section 11.4):
a worker that finds no free slot for a task leaves it 0, as every other reader sees it,
even in the moment between its claim and its try for a slot."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from asynch import worker
from asynch.models import AsynchModelStat, AsynchTask, TaskState
from asynch.semaphore import semaphore_key
from asynch.worker import claims
from tests.support.asynch_fixtures import get_semaphore, make_model, model_server_fixture, tenant_client  # noqa: F401
from tests.support.celery_workers import needs_postgres_and_redis  # noqa: F401  (fixture)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("needs_postgres_and_redis")]


def _state_seen_by_another_connection(task_id: str) -> int:
    seen: list[int] = []

    def read() -> None:
        try:
            seen.append(AsynchTask.objects.get(id=task_id).state)
        finally:
            connection.close()

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(10)
    return seen[0]


class _Watched:
    """The worker's semaphore, with a look from another connection at the task just
    before the worker asks for its slot."""

    def __init__(self, semaphore, task_id: str, seen: list[int]) -> None:
        self.semaphore, self.task_id, self.seen = semaphore, task_id, seen

    def acquire_many(self, *args, **kwargs):
        self.seen.append(_state_seen_by_another_connection(self.task_id))
        return self.semaphore.acquire_many(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.semaphore, name)


def test_a_worker_that_finds_no_free_slot_leaves_the_task_0_for_every_reader(model_server, monkeypatch):
    make_model(base_url=model_server.url, max_concurrency=1)
    biz = tenant_client("biz")
    task_id = biz.create_task("model-service").json()["taskId"]
    key = semaphore_key(biz.tenant.id, "model-service")
    outside = get_semaphore()
    assert outside.acquire(key, limit=1, token="someone-else", lease_seconds=30)  # the only slot, held elsewhere
    seen: list[int] = []
    real = claims.get_semaphore
    monkeypatch.setattr(claims, "get_semaphore", lambda: _Watched(real(), task_id, seen))
    try:
        assert worker.tasks_claim(calls=worker.model_calls(), limit=5, worker_id=worker.worker_id()) == []
    finally:
        outside.release(key, token="someone-else")
    assert seen == [TaskState.QUEUED]  # not 1, even mid-claim
    task = AsynchTask.objects.get(id=task_id)
    assert (task.state, task.attempt_no, task.locked_by, task.started_at) == (TaskState.QUEUED, 0, "", None)
    assert not AsynchModelStat.objects.filter(request_count__gt=0).exists()  # no call counted
    assert model_server.calls == []
    # With its slot free the same claim takes it: then, and only then, it shows 1.
    claimed = worker.tasks_claim(calls=worker.model_calls(), limit=5, worker_id=worker.worker_id())
    assert [item.task.id for item in claimed] == [task_id]
    assert _state_seen_by_another_connection(task_id) == TaskState.RUNNING
    assert get_semaphore().holders(key) == 1
    for item in claimed:
        worker.task_execute(item)
