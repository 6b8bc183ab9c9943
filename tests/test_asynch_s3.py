"""model-asynch with ``ASYNCH_RESULT_STORAGE=s3`` against a real S3 API
server (moto's, its own process): the result is an object in the bucket, ``ossFile``
is a presigned URL that downloads it with no credentials for
``ASYNCH_DOWNLOAD_URL_MAX_AGE`` seconds, and the object goes with its task (the
cleaner, retention)."""

from __future__ import annotations

import datetime as dt
import json
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.utils import timezone

from asynch import services
from asynch.models import AsynchTask, TaskState
from ops import retention
from tests.support.asynch_fixtures import make_model, model_server_fixture, run_queue, tenant_client  # noqa: F401
from tests.support.runtime_fixtures import free_port
from tests.support.s3 import s3_server_fixture  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

ANSWER = {"answer": "42", "text": "中文也行"}


@pytest.fixture
def bucket(s3_server, settings, request) -> str:
    name = s3_server.create_bucket(f"results-{request.node.name[-40:].replace('_', '-').lower()}")
    for key, value in s3_server.settings(name).items():
        setattr(settings, key, value)
    settings.ASYNCH_DOWNLOAD_URL_MAX_AGE = 600
    return name


@pytest.fixture
def biz(model_server):
    model_server.behaviour = lambda call, index: (200, ANSWER, 0)
    make_model(base_url=model_server.url, retry_times=1, auto_clean_seconds=60)
    return tenant_client("biz")


def test_the_result_is_an_object_in_the_bucket_and_oss_file_downloads_it(s3_server, bucket, biz):
    task_id = biz.create_task("model-service", {"q": 1}).json()["taskId"]
    assert run_queue() == ["succeeded"]

    key = f"asynch/{biz.tenant.id}/{task_id}.json"
    assert s3_server.keys(bucket) == [key]
    assert json.loads(s3_server.read(bucket, key)) == ANSWER
    oss_file = biz.get("/task/getTaskResult", {"taskId": task_id}).json()["ossFile"]
    assert oss_file.startswith(f"{s3_server.url}/{bucket}/{key}?")
    query = parse_qs(urlsplit(oss_file).query)
    assert query["X-Amz-Expires"] == ["600"] and "X-Amz-Signature" in query
    download = requests.get(oss_file, timeout=10)  # no credentials: the URL is the permission
    assert download.status_code == 200 and download.json() == ANSWER
    # (moto's server checks no signatures, so a forged URL is not tested here.)


def test_the_object_is_deleted_with_its_task_by_the_cleaner(s3_server, bucket, biz):
    task_id = biz.create_task("model-service").json()["taskId"]
    assert run_queue() == ["succeeded"]
    assert biz.post("/task/getTaskBatch", {"taskIds": [task_id]}).json()["results"][0]["state"] == 4
    assert len(s3_server.keys(bucket)) == 1
    totals = services.tasks_clean(now=timezone.now() + dt.timedelta(seconds=61))
    assert totals["deletedDownloaded"] == 1 and totals["deletedFiles"] == 1
    assert s3_server.keys(bucket) == [] and not AsynchTask.objects.filter(id=task_id).exists()


def test_retention_deletes_an_unclaimed_task_with_its_object(
    s3_server, bucket, biz, django_capture_on_commit_callbacks
):
    old, recent = (biz.create_task("model-service", {"n": n}).json()["taskId"] for n in range(2))
    assert run_queue() == ["succeeded", "succeeded"]
    AsynchTask.objects.filter(id=old).update(finished_at=timezone.now() - dt.timedelta(days=8))
    with django_capture_on_commit_callbacks(execute=True):
        report = retention.data_prune()
    assert report.kinds["asynchUnclaimed"] == {"asynch.AsynchTask": 1, "files": 1}
    assert s3_server.keys(bucket) == [f"asynch/{biz.tenant.id}/{recent}.json"]
    assert AsynchTask.objects.get(id=recent).state == TaskState.SUCCEEDED


def test_a_bucket_that_cannot_be_reached_fails_the_task_without_calling_the_model_again(
    s3_server, bucket, biz, model_server, settings
):
    settings.ASYNCH_S3_ENDPOINT_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings.ASYNCH_STORAGE_ATTEMPTS = 2
    task_id = biz.create_task("model-service").json()["taskId"]
    assert run_queue() == ["failed"]
    task = AsynchTask.objects.get(id=task_id)
    assert task.state == TaskState.FAILED and "Could not store the result" in task.error_message
    assert len(model_server.calls) == 1  # the upload was retried, the model called once
    assert s3_server.keys(bucket) == []
