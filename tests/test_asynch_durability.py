"""model-asynch keeps what it was given: a live call is not failed as stuck before its
model's ``timeoutSeconds``, and a model's answer is kept until its file is stored, so a
failed upload is retried across cleaner runs without calling the model again (an upload retry
is not a call: ``/model/stats`` does not count it)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.utils import timezone

from asynch import services
from asynch.models import AsynchModelStat, AsynchTask, AsynchTaskAnswer, TaskState
from tests.support.asynch_fixtures import make_model, model_server_fixture, run_queue, tenant_client  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


@pytest.fixture(autouse=True)
def _media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path
    settings.ASYNCH_SEMAPHORE_REDIS_URL = ""
    settings.VAR_DIR = tmp_path
    return tmp_path


def _stat_total() -> int:
    return sum(AsynchModelStat.objects.values_list("request_count", flat=True))


def test_a_failed_upload_is_retried_across_cleaner_runs_without_calling_the_model_again(model_server, settings):
    settings.ASYNCH_RESULT_STORAGE = "oss_service"
    settings.OSS_UPLOAD_URL = model_server.url + "/oss/file/uploadFile"
    settings.ASYNCH_STORAGE_ATTEMPTS = 2
    uploads: list[bytes] = []

    def behaviour(call, index):
        if call.path == "/oss/file/uploadFile":
            uploads.append(call.body)
            return (503, {}, 0) if len(uploads) <= 4 else (200, {"url": "https://oss.example/done"}, 0)
        return 200, {"answer": "the model's only answer"}, 0

    model_server.behaviour = behaviour
    make_model(base_url=model_server.url, retry_times=3, retry_queue_max_seconds=0)
    task_id = tenant_client("biz").create_task("model-service", HTTP_AUTHORIZATION="Bearer t").json()["taskId"]
    assert run_queue() == ["failed"]  # the model answered; both uploads of the attempt failed
    assert AsynchTaskAnswer.objects.filter(task_id=task_id).exists()
    for _ in range(2):  # two cleaner runs, each followed by a worker round
        assert services.tasks_clean()["retried"] == 1
        outcome = run_queue()
        assert outcome in (["failed"], ["succeeded"])
    task = AsynchTask.objects.get(id=task_id)
    assert (task.state, task.oss_file, task.retry_count) == (TaskState.SUCCEEDED, "https://oss.example/done", 2)
    model_calls = [call for call in model_server.calls if call.path != "/oss/file/uploadFile"]
    assert len(model_calls) == 1 and _stat_total() == 1  # one real call, counted once
    assert len(uploads) == 5 and all(b"the model's only answer" in body for body in uploads)
    assert not AsynchTaskAnswer.objects.exists()  # dropped once stored
    assert task.forward_headers_encrypted is None


def test_a_kept_answer_goes_with_its_task(model_server, settings):
    settings.ASYNCH_RESULT_STORAGE = "oss_service"
    settings.OSS_UPLOAD_URL = model_server.url + "/oss/file/uploadFile"
    settings.ASYNCH_STORAGE_ATTEMPTS = 1
    model_server.behaviour = lambda call, i: (503, {}, 0) if call.path.startswith("/oss") else (200, {"a": 1}, 0)
    make_model(base_url=model_server.url, retry_times=0, auto_clean_seconds=60)
    task_id = tenant_client("biz").create_task("model-service").json()["taskId"]
    assert run_queue() == ["failed"] and AsynchTaskAnswer.objects.filter(task_id=task_id).exists()
    totals = services.tasks_clean(now=timezone.now() + dt.timedelta(seconds=61))
    assert totals["deletedFailed"] == 1
    assert not AsynchTask.objects.exists() and not AsynchTaskAnswer.objects.exists()


def test_a_running_task_whose_lease_is_live_is_not_failed_before_its_models_timeout(settings):
    settings.ASYNCH_TASK_TIMEOUT_SECONDS = 600
    settings.ASYNCH_LEASE_SECONDS = 30
    make_model("slow-model", timeout_seconds=1800, retry_times=0)
    make_model("quick-model", timeout_seconds=5, retry_times=0)
    biz = tenant_client("biz")
    now = timezone.now()
    lease = now + dt.timedelta(seconds=30)

    def running(model: str, seconds_ago: int) -> str:
        task_id = biz.create_task(model).json()["taskId"]
        started = now - dt.timedelta(seconds=seconds_ago)
        AsynchTask.objects.filter(id=task_id).update(state=TaskState.RUNNING, started_at=started, lease_until=lease)
        return task_id

    live_long_call = running("slow-model", 1200)  # past the global 600 s, inside its model's 1,800 s
    past_its_timeout = running("slow-model", 1900)
    quick_stuck = running("quick-model", 700)  # its model's timeout is short: the global one applies
    quick_fine = running("quick-model", 100)
    assert services.tasks_clean(now=now)["failedStuck"] == 2
    states = {
        task_id: AsynchTask.objects.get(id=task_id).state
        for task_id in (live_long_call, past_its_timeout, quick_stuck, quick_fine)
    }
    assert states == {
        live_long_call: TaskState.RUNNING,
        past_its_timeout: TaskState.FAILED,
        quick_stuck: TaskState.FAILED,
        quick_fine: TaskState.RUNNING,
    }
    assert "while running" in AsynchTask.objects.get(id=past_its_timeout).error_message
