"""The worker and the cleaner against a real local model service (a threaded
http.server on 127.0.0.1): what the calls carry, timeouts, retries at the tail or
the head, retention, stuck tasks, result storage (Django storage and the OSS
service), statistics, and the semaphore on Redis and on the embedded file."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from asynch import crypto, services, transitions, worker
from asynch.models import AsynchModelStat, AsynchTask, TaskState
from asynch.semaphore import semaphore_key
from tests.support.asynch_fixtures import (  # noqa: F401
    get_semaphore,
    make_model,
    model_server_fixture,
    queue_order,
    run_queue,
    tenant_client,
)

# On the embedded default too: its claims, leases and cleaner are said with the ORM.
pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


@pytest.fixture(autouse=True)
def _media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path
    settings.ASYNCH_SEMAPHORE_REDIS_URL = ""  # the file semaphore unless a test asks for Redis
    settings.VAR_DIR = tmp_path
    return tmp_path


@pytest.fixture
def biz():
    return tenant_client("biz")


def _stat_total() -> int:
    return sum(AsynchModelStat.objects.values_list("request_count", flat=True))


def _task(task_id: str) -> AsynchTask:
    return AsynchTask.objects.get(id=task_id)


# --- the calls -------------------------------------------------------------------------------


def test_a_post_call_carries_the_configured_headers_and_the_payload_as_json(biz, model_server, _media):
    make_model(base_url=model_server.url + "/", route="api/v1/chat", timeout_seconds=3)
    task_id = biz.create_task("model-service", {"prompt": "hi", "n": [1, 2]}, HTTP_X_USER_INFO="alice").json()["taskId"]
    assert run_queue() == ["succeeded"]
    (call,) = model_server.calls
    assert call.method == "POST" and call.path == "/api/v1/chat"
    assert call.json == {"prompt": "hi", "n": [1, 2]}
    assert call.headers["API_KEY"] == "model-key" and call.headers["API_STATE"] == "true"
    assert call.headers["API_NUM"] == "123"
    task = _task(task_id)
    assert task.state == TaskState.SUCCEEDED and task.attempt_no == 1 and task.finished_at is not None
    stored = json.loads((_media / task.oss_file).read_bytes())
    assert stored == {"echo": {"prompt": "hi", "n": [1, 2]}, "query": {}}
    url = biz.get("/task/getTaskResult", {"taskId": task_id}).json()["ossFile"]
    download = biz.client.get(url.removeprefix("http://testserver"))
    assert json.loads(b"".join(download.streaming_content)) == stored
    assert AsynchModelStat.objects.get().request_count == 1
    assert AsynchModelStat.objects.get().creator == "alice"


def test_a_get_call_sends_the_payload_as_query_parameters(biz, model_server):
    make_model(base_url=model_server.url, route="/v1/search", http_method="GET", api_key="X-Token:abc")
    biz.create_task("model-service", {"q": "cats", "page": 2, "deep": True, "filter": {"a": 1}})
    assert run_queue() == ["succeeded"]
    (call,) = model_server.calls
    assert call.method == "GET" and call.path == "/v1/search" and call.body == b""
    assert call.query == {"q": "cats", "page": "2", "deep": "true", "filter": '{"a":1}'}
    assert call.headers["X-Token"] == "abc"


def test_an_error_answer_fails_the_task_with_the_status_and_counts_the_call(biz, model_server):
    model_server.behaviour = lambda call, i: (503, {"error": "overloaded"}, 0)
    make_model(base_url=model_server.url)
    task_id = biz.create_task("model-service").json()["taskId"]
    assert run_queue() == ["failed"]
    task = _task(task_id)
    assert task.state == TaskState.FAILED and task.http_status == 503 and "503" in task.error_message
    assert _stat_total() == 1
    body = biz.get("/task/getTaskResult", {"taskId": task_id}).json()
    assert body["state"] == 3 and "503" in body["errorMessage"] and body["ossFile"] is None


def test_an_unreachable_service_fails_the_task(biz):
    make_model(base_url="http://127.0.0.1:9")  # discard port: the connection is refused
    task_id = biz.create_task("model-service").json()["taskId"]
    assert run_queue() == ["failed"]
    assert "could not be reached" in _task(task_id).error_message
    assert _stat_total() == 1  # the worker did call: counted as sent


def test_a_timeout_fails_the_task_the_cleaner_retries_it_and_it_succeeds(biz, model_server):
    model_server.behaviour = lambda call, i: (200, {"ok": i}, 1.4 if i == 0 else 0)
    make_model(base_url=model_server.url, timeout_seconds=1, retry_times=2, retry_queue_max_seconds=0)
    task_id = biz.create_task("model-service").json()["taskId"]
    assert run_queue() == ["failed"]
    assert "did not answer within 1s" in _task(task_id).error_message
    assert run_queue() == []  # a failed task is retried by the cleaner, not the worker
    assert services.tasks_clean()["retried"] == 1
    task = _task(task_id)
    assert task.state == TaskState.QUEUED and task.retry_count == 1 and task.priority == 0
    assert run_queue() == ["succeeded"]
    task = _task(task_id)
    assert task.state == TaskState.SUCCEEDED and task.attempt_no == 2 and task.error_message is None
    assert len(model_server.calls) == 2 == _stat_total()


def test_exhausted_retries_leave_the_task_failed_then_delete_it_after_retention(biz, model_server):
    model_server.behaviour = lambda call, i: (500, {"error": "boom"}, 0)
    make_model(base_url=model_server.url, retry_times=1, auto_clean_seconds=300)
    task_id = biz.create_task("model-service").json()["taskId"]
    assert run_queue() == ["failed"]
    assert services.tasks_clean()["retried"] == 1
    assert run_queue() == ["failed"]
    assert services.tasks_clean()["retried"] == 0
    task = _task(task_id)
    assert task.state == TaskState.FAILED and task.retry_count == 1
    # The caller can still read the failure until the retention passes.
    assert biz.get("/task/getTaskResult", {"taskId": task_id}).json()["state"] == 3
    services.tasks_clean(now=timezone.now() + dt.timedelta(seconds=290))
    assert AsynchTask.objects.filter(id=task_id).exists()
    assert services.tasks_clean(now=timezone.now() + dt.timedelta(seconds=301))["deletedFailed"] == 1
    assert not AsynchTask.objects.filter(id=task_id).exists()
    assert len(model_server.calls) == 2 == _stat_total()


def test_a_failed_task_with_retries_left_is_never_deleted(biz, model_server):
    model_server.behaviour = lambda call, i: (500, {}, 0)
    make_model(base_url=model_server.url, retry_times=5, auto_clean_seconds=0)
    task_id = biz.create_task("model-service").json()["taskId"]
    run_queue()
    totals = services.tasks_clean(now=timezone.now() + dt.timedelta(days=1))
    assert totals["retried"] == 1 and not totals["deletedFailed"]
    assert _task(task_id).state == TaskState.QUEUED


def test_the_failures_of_a_deleted_config_go_after_the_default_retention_with_retries_left(biz, model_server, settings):
    settings.ASYNCH_DEFAULT_AUTO_CLEAN_SECONDS = 600
    model_server.behaviour = lambda call, i: (500, {}, 0)
    make_model(base_url=model_server.url, retry_times=5, auto_clean_seconds=60)
    orphan = biz.create_task("model-service").json()["taskId"]
    assert run_queue() == ["failed"]
    services.model_delete(model_name="model-service")
    make_model(model_name="other", base_url=model_server.url, retry_times=5, auto_clean_seconds=60)
    kept = biz.create_task("other").json()["taskId"]
    assert run_queue() == ["failed"]
    AsynchTask.objects.filter(id=kept).update(retry_count=5)  # no retry left: its own 60 s apply
    assert services.tasks_clean(now=timezone.now() + dt.timedelta(seconds=590))["deletedFailed"] == 1
    assert AsynchTask.objects.filter(id=orphan).exists() and not AsynchTask.objects.filter(id=kept).exists()
    assert services.tasks_clean(now=timezone.now() + dt.timedelta(seconds=601))["deletedFailed"] == 1
    assert not AsynchTask.objects.filter(id=orphan).exists()


def _queue_order(model_name: str = "model-service") -> list[str]:
    return queue_order(model_name=model_name)


def _fail_first_then_queue_two(biz, model_server, **model_fields) -> tuple[str, str, str]:
    model_server.behaviour = lambda call, i: (500, {}, 0)
    make_model(base_url=model_server.url, **model_fields)
    first = biz.create_task("model-service").json()["taskId"]
    assert run_queue() == ["failed"]
    second = biz.create_task("model-service").json()["taskId"]
    third = biz.create_task("model-service").json()["taskId"]
    return first, second, third


def test_a_retry_goes_to_the_tail_then_to_the_head_once_it_waited_retry_queue_max_seconds(biz, model_server):
    first, second, third = _fail_first_then_queue_two(biz, model_server, retry_queue_max_seconds=600)
    services.tasks_clean()
    assert _queue_order() == [second, third, first]
    services.tasks_clean(now=timezone.now() + dt.timedelta(seconds=300))
    assert _queue_order() == [second, third, first]
    assert services.tasks_clean(now=timezone.now() + dt.timedelta(seconds=601))["promoted"] == 1
    assert _queue_order() == [first, second, third]


def test_a_retry_with_retry_queue_max_seconds_0_goes_to_the_head_at_once(biz, model_server):
    first, second, third = _fail_first_then_queue_two(biz, model_server, retry_queue_max_seconds=0)
    services.tasks_clean()
    assert _queue_order() == [first, second, third]


def test_the_cleaner_fails_stuck_tasks_and_deletes_expired_downloads_with_their_files(biz, model_server, settings):
    make_model(base_url=model_server.url, retry_times=0)
    settings.ASYNCH_TASK_TIMEOUT_SECONDS = 60
    done = biz.create_task("model-service").json()["taskId"]
    assert run_queue() == ["succeeded"]
    queued, lapsed, slow, fine = (biz.create_task("model-service").json()["taskId"] for _ in range(4))
    past, soon = timezone.now() - dt.timedelta(seconds=120), timezone.now() + dt.timedelta(seconds=30)
    AsynchTask.objects.filter(id=queued).update(enqueue_at=past)
    AsynchTask.objects.filter(id=lapsed).update(state=TaskState.RUNNING, started_at=timezone.now(), lease_until=past)
    AsynchTask.objects.filter(id=slow).update(state=TaskState.RUNNING, started_at=past, lease_until=soon)
    AsynchTask.objects.filter(id=fine).update(state=TaskState.RUNNING, started_at=timezone.now(), lease_until=soon)
    assert services.tasks_clean()["failedStuck"] == 3
    assert "queue" in _task(queued).error_message and "lease lapsed" in _task(lapsed).error_message
    assert "while running" in _task(slow).error_message
    assert {_task(i).state for i in (queued, lapsed, slow)} == {TaskState.FAILED}
    assert _task(fine).state == TaskState.RUNNING

    picked = biz.post("/task/getTaskBatch", {"taskIds": [done]}).json()["results"]
    assert picked[0]["state"] == 4
    file = Path(settings.MEDIA_ROOT) / _task(done).oss_file
    assert file.exists()
    assert not services.tasks_clean().get("deletedDownloaded")
    totals = services.tasks_clean(now=timezone.now() + dt.timedelta(seconds=3601))
    assert totals["deletedDownloaded"] == 1 and totals["deletedFiles"] == 1
    assert not file.exists() and not AsynchTask.objects.filter(id=done).exists()


def test_the_cleaner_works_in_bounded_batches(biz, settings):
    make_model(retry_times=0)
    settings.ASYNCH_CLEANER_BATCH_SIZE = 2
    settings.ASYNCH_CLEANER_MAX_BATCHES = 2
    settings.ASYNCH_TASK_TIMEOUT_SECONDS = 1
    for _ in range(7):
        biz.create_task("model-service")
    AsynchTask.objects.update(enqueue_at=timezone.now() - dt.timedelta(seconds=10))
    assert services.tasks_clean()["failedStuck"] == 4
    assert services.tasks_clean()["failedStuck"] == 3


def test_a_late_success_after_the_task_was_failed_as_stuck_changes_nothing(biz, model_server):
    make_model(base_url=model_server.url)
    task_id = biz.create_task("model-service").json()["taskId"]
    (claimed,) = worker.tasks_claim(calls=worker.model_calls(), limit=5, worker_id="w1")
    AsynchTask.objects.filter(id=task_id).update(lease_until=timezone.now() - dt.timedelta(seconds=1))
    services.tasks_clean()  # failed (lease lapsed), then queued again for a retry
    assert worker.task_execute(claimed) == "lost"
    task = _task(task_id)
    assert task.state == TaskState.QUEUED and task.retry_count == 1 and task.oss_file is None


def test_a_disabled_model_keeps_its_queued_tasks_waiting(biz, model_server):
    make_model(base_url=model_server.url)
    task_id = biz.create_task("model-service").json()["taskId"]
    services.model_update(model_name="model-service", enabled=False)
    assert run_queue() == [] and _task(task_id).state == TaskState.QUEUED
    services.model_update(model_name="model-service", enabled=True)
    assert run_queue() == ["succeeded"]


def test_a_claimed_task_is_its_stored_row_field_for_field(biz):
    """The claim reads the task's columns in the model's order."""
    make_model(base_url="http://127.0.0.1:9")
    task_id = biz.create_task("model-service", {"prompt": "hi"}, creator="ann").json()["taskId"]
    now = timezone.now()
    (claimed,) = transitions.claim_next(
        model_names=["model-service"], exclude=[], limit=5, worker_id="w1", now=now, lease_until=now
    )
    stored = _task(task_id)
    assert stored.state == TaskState.RUNNING and stored.request_payload == {"prompt": "hi"}
    assert {f.attname: getattr(claimed, f.attname) for f in AsynchTask._meta.concrete_fields} == {
        f.attname: getattr(stored, f.attname) for f in AsynchTask._meta.concrete_fields
    }
    assert claimed.has_answer is False


# --- the semaphore in the claim ----------------------------------------------------------------------


def test_a_claim_skips_a_saturated_tenant_and_model_and_takes_the_others(biz, model_server):
    make_model(base_url=model_server.url, max_concurrency=1)
    other = tenant_client("other")
    blocked = [biz.create_task("model-service").json()["taskId"] for _ in range(3)]
    free = other.create_task("model-service").json()["taskId"]
    assert get_semaphore().acquire(semaphore_key(biz.tenant.id, "model-service"), limit=1, token="x", lease_seconds=30)
    claimed = worker.tasks_claim(calls=worker.model_calls(), limit=5, worker_id="w1")
    assert [c.task.id for c in claimed] == [free]
    assert {_task(i).state for i in blocked} == {TaskState.QUEUED}
    for item in claimed:
        worker.task_execute(item)
    get_semaphore().release(semaphore_key(biz.tenant.id, "model-service"), token="x")
    (again,) = worker.tasks_claim(calls=worker.model_calls(), limit=5, worker_id="w1")
    worker.task_execute(again)
    # Tasks claimed and put back for want of a slot are not counted as calls.
    assert _stat_total() == len(model_server.calls) == 2
    assert {_task(i).attempt_no for i in blocked} == {0, 1}


@pytest.mark.skipif(
    connection.vendor == "sqlite", reason="SQLite's in-memory test database locks its tables against other threads"
)
@pytest.mark.django_db(transaction=True)
def test_a_drain_runs_calls_in_parallel_but_never_more_than_max_concurrency(model_server, settings):
    settings.ASYNCH_WORKER_CONCURRENCY = 4
    settings.ASYNCH_WORKER_POLL_INTERVAL = 0.05
    model_server.behaviour = lambda call, i: (200, {"n": i}, 0.05)
    make_model(base_url=model_server.url, max_concurrency=2)
    biz = tenant_client("biz")
    ids = [biz.create_task("model-service", {"i": i}).json()["taskId"] for i in range(12)]
    totals = worker.tasks_drain(budget_seconds=30)
    assert totals["succeeded"] == 12
    assert model_server.max_in_flight == 2
    assert AsynchTask.objects.filter(id__in=ids, state=TaskState.SUCCEEDED, attempt_no=1).count() == 12
    assert sorted(c.json["i"] for c in model_server.calls) == list(range(12))
    assert get_semaphore().holders(semaphore_key(biz.tenant.id, "model-service")) == 0


# --- the OSS service backend -------------------------------------------------------------------------------


def test_the_oss_backend_uploads_with_the_captured_headers_kept_encrypted_then_dropped(biz, model_server, settings):
    settings.ASYNCH_RESULT_STORAGE = "oss_service"
    settings.OSS_UPLOAD_URL = model_server.url + "/oss/file/uploadFile"

    def behaviour(call, index):
        if call.path == "/oss/file/uploadFile":
            return 200, {"code": 0, "data": {"url": "https://oss.example/r/result.json"}}, 0
        return 200, {"answer": 42}, 0

    model_server.behaviour = behaviour
    make_model(base_url=model_server.url)
    task_id = biz.create_task(
        "model-service", {"q": 1}, HTTP_AUTHORIZATION="Bearer user-token-123", HTTP_X_USER_INFO="bob"
    ).json()["taskId"]
    stored = _task(task_id).forward_headers_encrypted
    assert stored and "user-token-123" not in stored
    assert json.loads(crypto.decrypt(stored)) == {"Authorization": "Bearer user-token-123", "X-User-Info": "bob"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT forward_headers_encrypted FROM asynch_task WHERE id = %s", [task_id])
        assert "user-token-123" not in cursor.fetchone()[0]

    assert run_queue() == ["succeeded"]
    model_call, upload = model_server.calls
    assert "Authorization" not in model_call.headers  # the model gets its own apiKey headers only
    assert upload.method == "POST" and upload.headers["Authorization"] == "Bearer user-token-123"
    assert upload.headers["X-User-Info"] == "bob" and upload.headers["Content-Type"].startswith("multipart/form-data")
    assert b'{"answer": 42}' in upload.body and b'filename="' + task_id.encode() + b'.json"' in upload.body
    task = _task(task_id)
    assert task.oss_file == "https://oss.example/r/result.json" and task.forward_headers_encrypted is None
    assert biz.get("/task/getTaskResult", {"taskId": task_id}).json()["ossFile"] == task.oss_file
    assert _stat_total() == 1  # the upload is not a model call


def test_a_failing_oss_upload_is_retried_without_calling_the_model_again(biz, model_server, settings):
    settings.ASYNCH_RESULT_STORAGE = "oss_service"
    settings.OSS_UPLOAD_URL = model_server.url + "/oss/file/uploadFile"
    uploads = []

    def behaviour(call, index):
        if call.path == "/oss/file/uploadFile":
            uploads.append(index)
            return (502, {}, 0) if len(uploads) < 3 else (200, {"url": "https://oss.example/ok"}, 0)
        return 200, {"answer": 1}, 0

    model_server.behaviour = behaviour
    make_model(base_url=model_server.url)
    biz.create_task("model-service", HTTP_AUTHORIZATION="Bearer t")
    assert run_queue() == ["succeeded"]
    assert len(uploads) == 3 and _stat_total() == 1


def test_the_enabled_switches_stop_the_worker_and_the_cleaner(biz, model_server, settings):
    make_model(base_url=model_server.url)
    task_id = biz.create_task("model-service").json()["taskId"]
    settings.ASYNCH_WORKER_ENABLED = False
    assert worker.tasks_drain(budget_seconds=1) == {} and _task(task_id).state == TaskState.QUEUED
    settings.ASYNCH_CLEANER_ENABLED = False
    settings.ASYNCH_TASK_TIMEOUT_SECONDS = 0
    assert services.tasks_clean(now=timezone.now() + dt.timedelta(days=1)) == {}
    assert _task(task_id).state == TaskState.QUEUED and model_server.calls == []
