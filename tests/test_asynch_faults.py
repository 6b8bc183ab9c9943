"""model-asynch when Redis dies under a call (issue 9): the semaphore lives on a
private ``redis-server`` that the model service kills while it answers. The answer
in hand is stored and the task finished, the slot whose release failed lapses with
its lease, the drain that cannot renew goes on, nothing is called twice, and no call
is made without a slot while Redis is gone."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynch import worker
from asynch.models import AsynchTask, TaskState
from asynch.semaphore import get_semaphore, semaphore_key
from tests.support import fault_fixtures
from tests.support.asynch_fixtures import make_model, model_server_fixture, run_queue, tenant_client

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

private_redis = fault_fixtures.private_redis
model_server = model_server_fixture


@pytest.fixture(autouse=True)
def _on_private_redis(settings, tmp_path: Path, private_redis) -> None:
    settings.MEDIA_ROOT = tmp_path
    settings.VAR_DIR = tmp_path
    settings.ASYNCH_SEMAPHORE_REDIS_URL = private_redis.url()


def test_an_answer_that_comes_after_redis_died_is_stored_and_its_slot_lapses_with_its_lease(
    model_server, private_redis, settings
):
    settings.ASYNCH_LEASE_SECONDS = 2.0

    def answer_after_redis_dies(call, index):
        private_redis.kill()
        return 200, {"answer": index}, 0

    model_server.behaviour = answer_after_redis_dies
    make_model(base_url=model_server.url, max_concurrency=1)
    biz = tenant_client("biz")
    task_id = biz.create_task("model-service", {"n": 1}).json()["taskId"]
    assert run_queue() == ["succeeded"]  # the release failed; the answer was stored all the same
    task = AsynchTask.objects.get(id=task_id)
    assert task.state == TaskState.SUCCEEDED and task.oss_file and len(model_server.calls) == 1

    # While Redis is down no task gets a slot, so none is called.
    second = biz.create_task("model-service", {"n": 2}).json()["taskId"]
    with pytest.raises(Exception, match="onnect"):
        run_queue()
    assert AsynchTask.objects.get(id=second).state == TaskState.QUEUED  # back in its place, uncalled
    assert len(model_server.calls) == 1
    private_redis.start()  # back, empty: the lost slot is no one's
    model_server.behaviour = None
    assert run_queue() == ["succeeded"] and len(model_server.calls) == 2
    assert get_semaphore().holders(semaphore_key(biz.tenant.id, "model-service")) == 0


def test_a_drain_whose_renewals_fail_while_the_call_runs_stores_the_answer_once_and_ends(
    model_server, private_redis, settings
):
    settings.ASYNCH_LEASE_SECONDS = 1.5  # renewals every 0.5 s, all of them while Redis is down

    def slow_answer_after_redis_dies(call, index):
        if index == 0:
            private_redis.kill()
            return 200, {"answer": index}, 2.0
        return 200, {"answer": index}, 0

    model_server.behaviour = slow_answer_after_redis_dies
    make_model(base_url=model_server.url, max_concurrency=2)
    biz = tenant_client("biz")
    first = biz.create_task("model-service", {"n": 1}).json()["taskId"]
    totals = worker.tasks_drain(budget_seconds=20)  # returns: no exception out of the Celery task
    assert totals["succeeded"] == 1
    assert AsynchTask.objects.get(id=first).state == TaskState.SUCCEEDED
    assert len(model_server.calls) == 1  # called once, stored once
    private_redis.start()
    second = biz.create_task("model-service", {"n": 2}).json()["taskId"]
    assert worker.tasks_drain(budget_seconds=20)["succeeded"] == 1  # the next drain works as before
    assert AsynchTask.objects.get(id=second).state == TaskState.SUCCEEDED and len(model_server.calls) == 2
