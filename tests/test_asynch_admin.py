"""Operators' side of model-asynch: the admin pages (model configs with the key
masked, tasks by state with their errors, daily statistics), its actions, and the
Celery beat entries of the worker poll and the cleaner."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone

from asynch import crypto, services
from asynch.models import AsynchModel, AsynchTask, TaskState, TenantApiKey
from tests.support.asynch_fixtures import make_model, tenant_client
from tests.support.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator() -> Client:
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


def test_the_admin_lists_tasks_by_state_with_their_errors_and_model_configs_masked(operator):
    biz = tenant_client("biz")
    make_model(api_key="API_KEY:secret-model-key-123")
    task_id = biz.create_task("model-service").json()["taskId"]
    AsynchTask.objects.filter(id=task_id).update(state=TaskState.FAILED, error_message="The model answered HTTP 503")
    page = operator.get("/admin/asynch/asynchtask/?state__exact=3")
    assert page.status_code == 200 and task_id in page.content.decode()
    assert "The model answered HTTP 503" in page.content.decode()
    assert task_id not in operator.get("/admin/asynch/asynchtask/?state__exact=0").content.decode()
    assert operator.get(f"/admin/asynch/asynchtask/{task_id}/change/").status_code == 200

    model = AsynchModel.objects.get()
    for url in ("/admin/asynch/asynchmodel/", f"/admin/asynch/asynchmodel/{model.pk}/change/"):
        body = operator.get(url).content.decode()
        assert "secret-model-key" not in body and "API_KEY:****-123" in body
    services.stat_count_call(tenant_id=biz.tenant.id, creator="u", model_name="model-service")
    stats = operator.get("/admin/asynch/asynchmodelstat/").content.decode()
    assert "model-service" in stats and biz.tenant.id in stats


def test_a_model_config_saved_in_the_admin_goes_through_the_service_and_is_encrypted(operator):
    form = {
        "model_name": "from-admin",
        "base_url": "http://127.0.0.1:9000",
        "route": "/v1",
        "http_method": "POST",
        "enabled": "on",
        "max_concurrency": 2,
        "queue_limit": 10,
        "timeout_seconds": 30,
        "retry_times": 1,
        "retry_queue_max_seconds": 0,
        "auto_clean_seconds": 60,
        "remark": "",
        "api_key": "X-Key:abc123",
    }
    assert operator.post("/admin/asynch/asynchmodel/add/", form).status_code == 302
    model = AsynchModel.objects.get(model_name="from-admin")
    assert "abc123" not in model.api_key_encrypted and crypto.decrypt(model.api_key_encrypted) == "X-Key:abc123"
    # Saving again with the key left blank keeps it.
    form.update(api_key="", max_concurrency=7)
    assert operator.post(f"/admin/asynch/asynchmodel/{model.pk}/change/", form).status_code == 302
    model.refresh_from_db()
    assert model.max_concurrency == 7 and crypto.decrypt(model.api_key_encrypted) == "X-Key:abc123"


def test_admin_actions_retry_failed_tasks_issue_and_revoke_keys(operator):
    biz = tenant_client("biz")
    make_model()
    failed, queued = (biz.create_task("model-service").json()["taskId"] for _ in range(2))
    AsynchTask.objects.filter(id=failed).update(state=TaskState.FAILED, finished_at=timezone.now())
    response = operator.post(
        "/admin/asynch/asynchtask/", {"action": "retry_now", "_selected_action": [failed, queued]}, follow=True
    )
    assert "1 failed task(s) queued again" in response.content.decode()
    task = AsynchTask.objects.get(id=failed)
    assert task.state == TaskState.QUEUED and task.priority == 0 and task.retry_count == 1

    response = operator.post(
        "/admin/asynch/tenant/", {"action": "issue_key", "_selected_action": [biz.tenant.pk]}, follow=True
    )
    assert "shown only now: ak_" in response.content.decode()
    assert TenantApiKey.objects.filter(tenant=biz.tenant).count() == 2
    first = TenantApiKey.objects.filter(tenant=biz.tenant).order_by("created_at").first()
    operator.post("/admin/asynch/tenantapikey/", {"action": "revoke", "_selected_action": [first.pk]})
    assert TenantApiKey.objects.get(pk=first.pk).revoked
    assert biz.get("/task/getTaskResult", {"taskId": failed}).status_code == 401


def test_beat_runs_the_worker_poll_and_the_cleaner_at_the_configured_intervals():
    schedule = {entry["task"]: entry for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}
    assert schedule["asynch.tasks.work"]["schedule"].total_seconds() == django_settings.ASYNCH_WORKER_POLL_INTERVAL
    assert schedule["asynch.tasks.clean"]["schedule"].total_seconds() == django_settings.ASYNCH_CLEANER_INTERVAL


def test_a_tenant_made_in_the_admin_can_be_given_a_key_and_deactivated(operator):
    inline = {"api_keys-TOTAL_FORMS": 0, "api_keys-INITIAL_FORMS": 0}
    response = operator.post(
        "/admin/asynch/tenant/add/", {"name": "acme", "is_admin": "on", "is_active": "on", **inline}
    )
    assert response.status_code == 302
    from asynch.models import Tenant

    tenant = Tenant.objects.get(name="acme")
    assert tenant.is_admin and tenant.id.startswith("ten_")
    issued = services.tenant_key_create(tenant=tenant)
    client = Client(HTTP_X_API_KEY=issued.key)
    assert client.get("/model/listModels").status_code == 200
    inline = {
        "api_keys-TOTAL_FORMS": 1,
        "api_keys-INITIAL_FORMS": 1,
        "api_keys-0-id": issued.api_key.pk,
        "api_keys-0-tenant": tenant.pk,
    }
    response = operator.post(f"/admin/asynch/tenant/{tenant.pk}/change/", {"name": "acme", "is_admin": "on", **inline})
    assert response.status_code == 302
    assert client.get("/model/listModels").status_code == 401  # inactive: its keys stop working
