"""The model-asynch API end to end through DRF's client:
authentication, model configs, tasks, batch pickup, statistics, downloads."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.api.tokens import AccessToken
from asynch import crypto, services
from asynch.models import AsynchModel, AsynchModelStat, AsynchTask, TaskState, TenantApiKey
from tests.support.api import error_code
from tests.support.asynch_fixtures import make_model, tenant_client
from tests.support.factories import UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

SEED_BODY = {
    "modelName": "model-service",
    "baseUrl": "http://127.0.0.1:8000",
    "route": "/api/v1/chat",
    "httpMethod": "POST",
    "apiKey": "API_KEY:model-key,API_STATE:true,API_NUM:123",
    "enabled": 1,
    "maxConcurrency": 5,
    "queueLimit": 20,
    "timeoutSeconds": 1800,
    "retryTimes": 3,
    "retryQueueMaxSeconds": 600,
    "autoCleanSeconds": 3600,
    "remark": "Model-Service 模型服务",
}


@pytest.fixture
def admin():
    return tenant_client("ops", is_admin=True)


@pytest.fixture
def biz():
    return tenant_client("biz")


def _succeed(task: AsynchTask, oss_file: str = "asynch/x/result.json") -> None:
    AsynchTask.objects.filter(id=task.id).update(state=TaskState.SUCCEEDED, oss_file=oss_file)


# --- authentication -----------------------------------------------------------------------


def test_model_endpoints_need_an_admin_tenant_key_or_the_jwt_of_staff_who_may_change_model_configs(admin, biz):
    anonymous = APIClient()
    response = anonymous.get("/model/listModels")
    assert response.status_code == 401 and error_code(response) == "UNAUTHORIZED"
    bad = APIClient()
    bad.credentials(HTTP_X_API_KEY="ak_not-a-key")
    assert error_code(bad.get("/model/listModels")) == "UNAUTHORIZED"
    response = biz.get("/model/getModel", {"modelName": "m"})
    assert response.status_code == 403 and error_code(response) == "FORBIDDEN"
    assert admin.get("/model/listModels").status_code == 200

    staff, learner = APIClient(), APIClient()
    member = UserFactory(is_staff=True)
    staff.credentials(HTTP_AUTHORIZATION=f"Bearer {AccessToken.for_user(member)}")
    learner.credentials(HTTP_AUTHORIZATION=f"Bearer {AccessToken.for_user(UserFactory())}")
    assert error_code(staff.post("/model/createModel", SEED_BODY, format="json")) == "FORBIDDEN"
    member.user_permissions.add(Permission.objects.get(codename="change_asynchmodel"))
    assert staff.post("/model/createModel", SEED_BODY, format="json").status_code == 201
    assert error_code(learner.get("/model/listModels")) == "FORBIDDEN"


def test_keys_are_stored_hashed_and_a_revoked_key_is_refused(biz):
    stored = TenantApiKey.objects.get(tenant=biz.tenant)
    assert biz.key not in (stored.key_hash, stored.prefix) and stored.key_hash == services.hash_api_key(biz.key)
    assert biz.get("/task/getTaskResult", {"taskId": "task_x"}).status_code == 404
    stored.refresh_from_db()
    assert stored.last_used_at is not None
    services.tenant_keys_revoke(key_ids=[stored.id])
    assert error_code(biz.get("/task/getTaskResult", {"taskId": "task_x"})) == "UNAUTHORIZED"


def test_task_endpoints_take_only_tenant_keys():
    staff = APIClient()
    staff.credentials(HTTP_AUTHORIZATION=f"Bearer {AccessToken.for_user(UserFactory(is_staff=True))}")
    assert (
        error_code(staff.post("/task/createTask", {"modelName": "m", "requestPayload": {}}, format="json"))
        == "UNAUTHORIZED"
    )


def test_create_tenant_key_prints_the_key_once_says_whether_the_tenant_is_an_admin_and_the_key_works():
    out, err = io.StringIO(), io.StringIO()
    call_command("create_tenant_key", "acme", "--admin", stdout=out, stderr=err)
    key = out.getvalue().strip()
    assert key.startswith("ak_") and key not in err.getvalue()
    assert "acme" in err.getvalue() and "an admin tenant: it may manage model configs" in err.getvalue()
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key)
    assert client.post("/model/createModel", SEED_BODY, format="json").status_code == 201
    err = io.StringIO()
    call_command("create_tenant_key", "acme", stdout=io.StringIO(), stderr=err)
    assert TenantApiKey.objects.filter(tenant__name="acme").count() == 2
    assert "an admin tenant" in err.getvalue()  # --admin only ever grants: still one
    err = io.StringIO()
    call_command("create_tenant_key", "shop", stdout=io.StringIO(), stderr=err)
    assert "not an admin" in err.getvalue() and "--admin makes it one" in err.getvalue()


def test_a_tenant_that_is_not_an_admin_lists_the_enabled_models_names_and_limits_only(admin, biz):
    assert admin.post("/model/createModel", SEED_BODY).status_code == 201
    hidden = {**SEED_BODY, "modelName": "retired-model", "enabled": 0}
    assert admin.post("/model/createModel", hidden).status_code == 201
    response = biz.get("/model/listModels")
    assert response.status_code == 200
    body = response.json()
    assert body == {
        "results": [
            {
                "modelName": "model-service",
                "maxConcurrency": 5,
                "queueLimit": 20,
                "timeoutSeconds": 1800,
                "retryTimes": 3,
                "retryQueueMaxSeconds": 600,
                "autoCleanSeconds": 3600,
            }
        ],
        "next": None,
    }
    for secret in ("API_KEY", "model-key", "127.0.0.1", "baseUrl", "apiKey", "/api/v1/chat"):
        assert secret not in response.content.decode()
    everything = admin.get("/model/listModels").json()["results"]
    assert [m["modelName"] for m in everything] == ["model-service", "retired-model"]
    assert everything[0]["baseUrl"] == SEED_BODY["baseUrl"] and "model-key" not in everything[0]["apiKey"]


# --- model configs ------------------------------------------------------------------------


def test_create_model_with_the_seed_body_answers_201_with_the_api_key_masked(admin):
    response = admin.post("/model/createModel", SEED_BODY)
    assert response.status_code == 201, response.json()
    body = response.json()
    for key, value in SEED_BODY.items():
        if key != "apiKey":
            assert body[key] == value, key
    assert body["apiKey"] == "API_KEY:****,API_STATE:****,API_NUM:****"
    assert "model-key" not in response.content.decode()
    stored = AsynchModel.objects.get(model_name="model-service")
    assert "model-key" not in stored.api_key_encrypted
    assert crypto.decrypt(stored.api_key_encrypted) == SEED_BODY["apiKey"]
    assert body["id"] and not body["id"].isdigit()


def test_get_update_list_and_delete_a_model(admin):
    admin.post("/model/createModel", SEED_BODY)
    response = admin.get("/model/getModel", {"modelName": "model-service"})
    assert response.status_code == 200 and response.json()["route"] == "/api/v1/chat"

    response = admin.post(
        "/model/updateModel",
        {
            "modelName": "model-service",
            "httpMethod": "get",
            "maxConcurrency": 2,
            "apiKey": "Authorization:Bearer abcdefghijkl",
        },
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["httpMethod"] == "GET" and body["maxConcurrency"] == 2 and body["queueLimit"] == 20
    assert body["apiKey"] == "Authorization:****ijkl"

    listed = admin.get("/model/listModels").json()
    assert [m["modelName"] for m in listed["results"]] == ["model-service"] and listed["next"] is None

    assert admin.post("/model/deleteModel", {"modelName": "model-service"}).json() == {
        "modelName": "model-service",
        "deleted": True,
    }
    for response in (
        admin.get("/model/getModel", {"modelName": "model-service"}),
        admin.post("/model/deleteModel", {"modelName": "model-service"}),
        admin.post("/model/updateModel", {"modelName": "model-service", "enabled": 0}),
    ):
        assert response.status_code == 404 and error_code(response) == "MODEL_NOT_FOUND"


def test_bad_model_bodies_get_400_validation_error_naming_the_fields(admin):
    bad = {
        **SEED_BODY,
        "baseUrl": "ftp://x",
        "httpMethod": "PUT",
        "apiKey": "no-colon-here",
        "enabled": 7,
        "maxConcurrency": 0,
        "timeoutSeconds": -1,
    }
    response = admin.post("/model/createModel", bad)
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert set(response.json()["error"]["fields"]) == {
        "baseUrl",
        "httpMethod",
        "apiKey",
        "enabled",
        "maxConcurrency",
        "timeoutSeconds",
    }
    assert error_code(admin.post("/model/createModel", {})) == "VALIDATION_ERROR"
    assert error_code(admin.get("/model/getModel")) == "VALIDATION_ERROR"
    assert error_code(admin.post("/model/updateModel", {"maxConcurrency": 3})) == "VALIDATION_ERROR"
    assert admin.client.post("/model/createModel", "{not json", content_type="application/json").status_code == 400
    admin.post("/model/createModel", SEED_BODY)
    duplicate = admin.post("/model/createModel", SEED_BODY)
    assert duplicate.status_code == 400 and "modelName" in duplicate.json()["error"]["fields"]


# --- tasks -------------------------------------------------------------------------------


def test_create_task_answers_201_with_an_opaque_task_id_in_state_0(biz):
    make_model()
    response = biz.create_task("model-service", {"prompt": "hi"}, bizName="chat", HTTP_X_USER_INFO='{"userId": 42}')
    assert response.status_code == 201
    body = response.json()
    assert body["state"] == 0 and set(body) == {"taskId", "state"} and body["taskId"].startswith("task_")
    task = AsynchTask.objects.get(id=body["taskId"])
    assert task.tenant == biz.tenant and task.creator == "42" and task.biz_name == "chat"
    assert task.request_payload == {"prompt": "hi"}
    # The default storage needs no forwarded headers: none are kept.
    assert task.forward_headers_encrypted is None
    assert biz.create_task("model-service", creator="svc-a").status_code == 201
    assert AsynchTask.objects.filter(creator="svc-a").count() == 1


def test_create_task_errors_unknown_disabled_full_queue_and_bad_body(biz):
    response = biz.create_task("nope")
    assert response.status_code == 404 and error_code(response) == "MODEL_NOT_FOUND"
    make_model("off", enabled=False)
    response = biz.create_task("off")
    assert response.status_code == 409 and error_code(response) == "MODEL_DISABLED"
    make_model("small", queue_limit=2)
    assert biz.create_task("small").status_code == 201
    assert biz.create_task("small").status_code == 201
    response = biz.create_task("small")
    assert response.status_code == 429 and error_code(response) == "QUEUE_LIMIT_EXCEEDED"
    assert response.json()["error"]["retryable"] is True
    # Running tasks are not queued: the queue has room again.
    AsynchTask.objects.filter(model_name="small").update(state=TaskState.RUNNING)
    assert biz.create_task("small").status_code == 201
    response = biz.post("/task/createTask", {"modelName": "small", "requestPayload": [1, 2]})
    assert response.status_code == 400 and "requestPayload" in response.json()["error"]["fields"]
    for payload in ('{"x": "nul\\u0000"}', '{"x": "lone \\ud800 surrogate"}', '{"n\\u0000": [1]}'):
        body = '{"modelName": "small", "requestPayload": ' + payload + "}"
        response = biz.client.post("/task/createTask", body, content_type="application/json")
        assert response.status_code == 400 and "requestPayload" in response.json()["error"]["fields"], payload
    response = biz.create_task("small", {"x": "a" * 3_000_000})  # past DATA_UPLOAD_MAX_MEMORY_SIZE
    assert response.status_code == 400 and "body" in response.json()["error"]["fields"]


def test_get_task_result_shows_only_the_tenants_own_tasks(biz):
    make_model()
    task_id = biz.create_task("model-service").json()["taskId"]
    response = biz.get("/task/getTaskResult", {"taskId": task_id})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"taskId", "state", "ossFile", "errorMessage", "retryCount", "createdAt", "finishedAt"}
    assert body["state"] == 0 and body["ossFile"] is None and body["retryCount"] == 0
    other = tenant_client("other")
    response = other.get("/task/getTaskResult", {"taskId": task_id})
    assert response.status_code == 404 and error_code(response) == "NOT_FOUND"
    assert error_code(biz.get("/task/getTaskResult")) == "VALIDATION_ERROR"


def test_get_task_batch_marks_only_succeeded_tasks_downloaded(biz):
    make_model(auto_clean_seconds=120)
    ids = [biz.create_task("model-service").json()["taskId"] for _ in range(4)]
    queued, done, failed, running = (AsynchTask.objects.get(id=i) for i in ids)
    _succeed(done)
    AsynchTask.objects.filter(id=failed.id).update(state=TaskState.FAILED, error_message="boom")
    AsynchTask.objects.filter(id=running.id).update(state=TaskState.RUNNING)
    other_id = tenant_client("other").create_task("model-service").json()["taskId"]

    before = timezone.now()
    response = biz.post("/task/getTaskBatch", {"taskIds": [*ids, "task_unknown", other_id, done.id]})
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["taskId"] for r in results] == ids
    by_id = {r["taskId"]: r for r in results}
    assert by_id[done.id]["state"] == 4 and by_id[done.id]["ossFile"].startswith("http://testserver/task/download/")
    assert [by_id[i]["state"] for i in (queued.id, failed.id, running.id)] == [0, 3, 1]
    assert all(by_id[i]["ossFile"] is None for i in (queued.id, failed.id, running.id))
    done.refresh_from_db()
    assert done.state == TaskState.DOWNLOADED
    assert before + dt.timedelta(seconds=119) <= done.expire_at <= timezone.now() + dt.timedelta(seconds=121)
    assert AsynchTask.objects.get(id=other_id).state == TaskState.QUEUED
    # A second pickup finds it downloaded and keeps its expiry.
    again = biz.post("/task/getTaskBatch", {"taskIds": [done.id]}).json()["results"]
    assert again[0]["state"] == 4 and AsynchTask.objects.get(id=done.id).expire_at == done.expire_at


def test_get_task_batch_validates_its_list(biz):
    for body in ({}, {"taskIds": []}, {"taskIds": "x"}, {"taskIds": [f"t{i}" for i in range(501)]}):
        response = biz.post("/task/getTaskBatch", body)
        assert response.status_code == 400 and "taskIds" in response.json()["error"]["fields"], body
    assert biz.post("/task/getTaskBatch", {"taskIds": [f"t{i}" for i in range(500)]}).json() == {"results": []}


# --- downloads ------------------------------------------------------------------------------


def test_the_download_url_is_signed_and_expires(biz, settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"}}
    settings.MEDIA_ROOT = tmp_path
    make_model()
    task = AsynchTask.objects.get(id=biz.create_task("model-service").json()["taskId"])
    (tmp_path / "asynch" / "t").mkdir(parents=True)
    (tmp_path / "asynch" / "t" / "r.json").write_bytes(b'{"answer": 42}')
    _succeed(task, "asynch/t/r.json")
    url = biz.get("/task/getTaskResult", {"taskId": task.id}).json()["ossFile"]
    path = url.removeprefix("http://testserver")
    anonymous = APIClient()
    response = anonymous.get(path)
    assert response.status_code == 200 and b"".join(response.streaming_content) == b'{"answer": 42}'
    assert error_code(anonymous.get(path[:-3] + "xyz")) == "NOT_FOUND"
    settings.ASYNCH_DOWNLOAD_URL_MAX_AGE = -1
    assert anonymous.get(path).status_code == 404


# --- statistics -------------------------------------------------------------------------------


def test_stats_show_a_tenant_its_own_rows_and_admins_every_row(admin, biz):
    today = timezone.now()
    other = tenant_client("other")
    for tenant_id, count in ((biz.tenant.id, 3), (other.tenant.id, 2)):
        for _ in range(count):
            services.stat_count_call(tenant_id=tenant_id, creator="u1", model_name="m1", now=today)
    services.stat_count_call(tenant_id=biz.tenant.id, creator="u1", model_name="m1", now=today - dt.timedelta(days=1))
    day = today.date().isoformat()
    own = biz.get("/model/stats", {"day": day}).json()["results"]
    assert own == [{"day": day, "tenantId": biz.tenant.id, "creator": "u1", "modelName": "m1", "requestCount": 3}]
    every = admin.get("/model/stats", {"day": day, "modelName": "m1"}).json()["results"]
    assert sorted(r["requestCount"] for r in every) == [2, 3]
    assert len(biz.get("/model/stats").json()["results"]) == 2
    assert admin.get("/model/stats", {"modelName": "other"}).json()["results"] == []
    assert error_code(biz.get("/model/stats", {"day": "yesterday"})) == "VALIDATION_ERROR"
    assert AsynchModelStat.objects.count() == 3


def test_the_schema_lists_every_model_asynch_endpoint(client):
    paths = client.get("/api/schema", HTTP_ACCEPT="application/json").json()["paths"]
    for path in (
        "/model/createModel",
        "/model/updateModel",
        "/model/deleteModel",
        "/model/getModel",
        "/model/listModels",
        "/model/stats",
        "/task/createTask",
        "/task/getTaskResult",
        "/task/getTaskBatch",
    ):
        assert path in paths


def test_model_secrets_survive_a_key_rotation_that_prepends_a_bare_key(settings):
    import base64
    import os

    from asynch import crypto

    old, new = (base64.b64encode(os.urandom(32)).decode() for _ in range(2))
    settings.CREDENTIAL_ENCRYPTION_KEYS = [old]
    token = crypto.encrypt("API_KEY:model-key")
    settings.CREDENTIAL_ENCRYPTION_KEYS = [new, old]  # a bare key keeps its id wherever it stands
    assert crypto.decrypt(token) == "API_KEY:model-key"
    assert crypto.encrypt("x").split(":")[1] != token.split(":")[1]
