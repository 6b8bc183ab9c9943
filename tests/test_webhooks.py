"""Webhooks of model-asynch (contract section 11.3) in the test's process: the
``/webhook/*`` API through DRF's client, tasks run by the worker's own code in this
thread, and each delivery's try by the outbox's engine (``delivery_send``) against a
receiver on 127.0.0.1 that verifies every delivery with the ``standardwebhooks``
library's verifier. The real Celery workers' path is ``test_webhooks_celery``.
Also ``getTaskResult``'s ETag (section 11.4)."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth.models import Permission
from django.db import transaction
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from asynch import events, services, worker
from asynch.models import AsynchModel, AsynchTask, TaskState
from config import keyring
from delivery.models import Delivery, DeliveryAttempt, WebhookEndpoint
from delivery.services import outbox, webhooks
from tests.support.api import error_code
from tests.support.asynch_fixtures import (
    ModelServer,
    TenantClient,
    local_server,
    make_model,
    model_server_fixture,  # noqa: F401  (fixture)
    run_queue,
    tenant_client,
)
from tests.support.factories import UserFactory
from tests.support.ops import Scrape

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

ENDPOINT_KEYS = {"endpointId", "url", "events", "description", "enabled", "createdAt"}
DELIVERY_KEYS = {"deliveryId", "eventId", "eventType", "taskId", "status", "attempts", "lastStatusCode", "lastError",
                 "nextAttemptAt", "createdAt", "deliveredAt"}  # fmt: skip


@pytest.fixture(autouse=True)
def _webhook_settings(settings) -> None:
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.WEBHOOK_RETRY_SCHEDULE = "0s,0s,0s"
    settings.ASYNCH_PUBLIC_BASE_URL = "https://results.example"


@pytest.fixture
def receiver() -> Iterator[ModelServer]:
    with local_server() as server:
        server.behaviour = lambda call, index: (200, {"ok": True}, 0.0)
        yield server


@pytest.fixture
def biz() -> TenantClient:
    return tenant_client("biz")


def create_endpoint(client: TenantClient, url: str, **body: object) -> dict:
    response = client.post("/webhook/createEndpoint", {"url": url, **body})
    assert response.status_code == 201, response.content
    return response.json()


def finished_task(client: TenantClient, model_server: ModelServer, *, fail: bool = False) -> str:
    """A task of ``client`` run to its end by the worker's code: succeeded, or failed
    with no retry left."""
    model_server.behaviour = lambda call, index: (500, {"error": "no"}, 0.0) if fail else (200, {"ok": 1}, 0.0)
    make_model("hooked", base_url=model_server.url, retry_times=0)
    task_id = client.create_task("hooked", {"q": 1}, bizName="biz-a", creator="alice").json()["taskId"]
    run_queue()
    assert AsynchTask.objects.get(id=task_id).state == (TaskState.FAILED if fail else TaskState.SUCCEEDED)
    return task_id


def send_all() -> list[str | None]:
    return [
        outbox.delivery_send(delivery_id=d)
        for d in Delivery.objects.filter(kind="webhook").values_list("id", flat=True)
    ]


def answer(response) -> tuple[str, int]:
    return error_code(response), response.status_code


def verified(secret: str, call) -> dict:
    return Webhook(secret).verify(call.body, call.headers)


# --- endpoints -------------------------------------------------------------------------------------------


def test_create_answers_the_endpoint_and_its_secret_once_kept_sealed_with_the_keyring(biz, receiver):
    created = create_endpoint(biz, receiver.url, description="ours")
    assert set(created) == ENDPOINT_KEYS | {"secret"}
    assert created["events"] == ["task.succeeded", "task.failed"] and created["enabled"] is True
    assert created["endpointId"].startswith("ep_") and created["description"] == "ours"
    secret = created["secret"]
    assert secret.startswith("whsec_") and len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) >= 24
    stored = WebhookEndpoint.objects.get(id=created["endpointId"]).secret_encrypted
    assert secret not in stored and secret.removeprefix("whsec_") not in stored
    assert keyring.open_text(stored, context=webhooks.SECRET_CONTEXT) == secret
    listed = biz.get("/webhook/listEndpoints").json()
    assert [set(item) for item in listed["results"]] == [ENDPOINT_KEYS] and listed["next"] is None
    assert secret not in json.dumps(listed)


def test_update_is_partial_and_enabled_true_turns_a_disabled_endpoint_back_on(biz, receiver):
    created = create_endpoint(biz, receiver.url, events=["task.failed"])
    endpoint_id = created["endpointId"]
    WebhookEndpoint.objects.filter(id=endpoint_id).update(
        enabled=False, disabled_reason="failing", failing_since=timezone.now() - dt.timedelta(days=9)
    )
    response = biz.post("/webhook/updateEndpoint", {"endpointId": endpoint_id, "description": "new"})
    assert response.status_code == 200 and set(response.json()) == ENDPOINT_KEYS
    body = response.json()
    assert (body["description"], body["events"], body["url"], body["enabled"]) == ("new", ["task.failed"],
                                                                                   receiver.url, False)  # fmt: skip
    body = biz.post("/webhook/updateEndpoint", {"endpointId": endpoint_id, "enabled": True}).json()
    assert body["enabled"] is True and body["description"] == "new"
    assert WebhookEndpoint.objects.get(id=endpoint_id).failing_since is None
    response = biz.post("/webhook/updateEndpoint", {"endpointId": endpoint_id, "events": ["task.paid"]})
    assert response.status_code == 400 and "events" in response.json()["error"]["fields"]


def test_delete_answers_200_then_the_endpoint_is_gone(biz, receiver):
    endpoint_id = create_endpoint(biz, receiver.url)["endpointId"]
    response = biz.post("/webhook/deleteEndpoint", {"endpointId": endpoint_id})
    assert response.status_code == 200 and response.json() == {"endpointId": endpoint_id, "deleted": True}
    assert answer(biz.post("/webhook/deleteEndpoint", {"endpointId": endpoint_id})) == ("NOT_FOUND", 404)
    assert biz.get("/webhook/listEndpoints").json()["results"] == []


@pytest.mark.parametrize(
    "url",
    [
        "https://10.0.0.1/hook",  # private
        "https://169.254.169.254/latest",  # link-local (cloud metadata)
        "https://[::1]:8443/hook",  # loopback
        "https://0.0.0.0/hook",  # unspecified
        "https://example.com\\@10.0.0.1/",  # a backslash: two parsers, two hosts
        "https://user@example.com/hook",  # userinfo
        "https://example.com/ hook",  # whitespace
        "http://public.example/hook",  # plain http, not listed
        "not a url",
    ],
)
def test_an_endpoint_on_a_private_address_or_a_url_two_parsers_read_apart_is_refused_at_save(biz, url):
    response = biz.post("/webhook/createEndpoint", {"url": url})
    assert answer(response) == ("VALIDATION_ERROR", 400)
    assert list(response.json()["error"]["fields"]) == ["url"]
    assert not WebhookEndpoint.objects.exists()


def test_a_url_refused_by_update_leaves_the_endpoint_as_it_was(biz, receiver):
    endpoint_id = create_endpoint(biz, receiver.url)["endpointId"]
    response = biz.post("/webhook/updateEndpoint", {"endpointId": endpoint_id, "url": "https://192.168.1.5/x"})
    assert answer(response) == ("VALIDATION_ERROR", 400) and list(response.json()["error"]["fields"]) == ["url"]
    assert WebhookEndpoint.objects.get(id=endpoint_id).url == receiver.url


def test_another_tenants_key_sees_none_of_the_endpoints_or_deliveries(biz, receiver, model_server):
    endpoint_id = create_endpoint(biz, receiver.url)["endpointId"]
    finished_task(biz, model_server)
    delivery_id = Delivery.objects.get(kind="webhook").id
    other = tenant_client("other")
    assert other.get("/webhook/listEndpoints").json() == {"results": [], "next": None}
    assert other.get("/webhook/listDeliveries").json() == {"results": [], "next": None}
    assert answer(other.get("/webhook/listDeliveries", {"endpointId": endpoint_id})) == ("NOT_FOUND", 404)
    blank = biz.get("/webhook/listDeliveries", {"endpointId": "", "status": ""})  # as the contract writes the path
    assert blank.status_code == 200 and blank.json()["results"][0]["deliveryId"] == delivery_id
    for path, body in [
        ("/webhook/updateEndpoint", {"endpointId": endpoint_id, "description": "x"}),
        ("/webhook/rotateSecret", {"endpointId": endpoint_id}),
        ("/webhook/deleteEndpoint", {"endpointId": endpoint_id}),
        ("/webhook/replay", {"deliveryId": delivery_id}),
    ]:
        assert answer(other.post(path, body)) == ("NOT_FOUND", 404), path
    assert WebhookEndpoint.objects.get(id=endpoint_id).description == ""
    assert [d["deliveryId"] for d in biz.get("/webhook/listDeliveries").json()["results"]] == [delivery_id]


def test_webhook_paths_need_a_tenant_key(receiver):
    assert answer(APIClient().get("/webhook/listEndpoints")) == ("UNAUTHORIZED", 401)


# --- events and tries ------------------------------------------------------------------------------------


def test_a_succeeded_task_arrives_once_per_endpoint_signed_with_the_body_of_the_contract(biz, receiver, model_server):
    with local_server() as second:
        secrets = [create_endpoint(biz, server.url)["secret"] for server in (receiver, second)]
        create_endpoint(biz, receiver.url + "/failed-only", events=["task.failed"])
        task_id = finished_task(biz, model_server)
        assert send_all() == ["delivered", "delivered"]
        assert send_all() == [None, None]  # a task that runs twice never sends twice
        calls = [receiver.calls, second.calls]
    assert [len(c) for c in calls] == [1, 1]
    bodies = [verified(secret, c[0]) for secret, c in zip(secrets, calls, strict=True)]
    assert bodies[0] == bodies[1]
    assert calls[0][0].headers["webhook-id"] == calls[1][0].headers["webhook-id"]
    task = AsynchTask.objects.get(id=task_id)
    body = bodies[0]
    assert set(body) == {"type", "timestamp", "data"} and body["type"] == "task.succeeded"
    assert body["data"] == {
        "taskId": task_id, "modelName": "hooked", "state": 2, "bizName": "biz-a", "creator": "alice",
        "retryCount": 0, "finishedAt": task.finished_at.isoformat().replace("+00:00", "Z"),
        "ossFile": body["data"]["ossFile"],
    }  # fmt: skip
    assert body["data"]["ossFile"].startswith("https://results.example/task/download/")
    headers = {name.lower(): value for name, value in calls[0][0].headers.items()}
    assert headers["content-type"] == "application/json"
    assert abs(int(headers["webhook-timestamp"]) - timezone.now().timestamp()) < 60
    assert headers["webhook-signature"].startswith("v1,") and " " not in headers["webhook-signature"]


def test_a_task_failed_for_good_arrives_with_its_error_and_one_with_a_retry_left_sends_nothing(
    biz, receiver, model_server
):
    secret = create_endpoint(biz, receiver.url)["secret"]
    model_server.behaviour = lambda call, index: (500, {"error": "no"}, 0.0)
    make_model("retrying", base_url=model_server.url, retry_times=2)
    biz.create_task("retrying")
    run_queue()
    assert AsynchTask.objects.get(model_name="retrying").state == TaskState.FAILED
    assert not Delivery.objects.exists()  # it will be queued again: not failed for good
    task_id = finished_task(biz, model_server, fail=True)
    assert send_all() == ["delivered"]
    body = verified(secret, receiver.calls[0])
    assert body["type"] == "task.failed"
    assert set(body["data"]) == {"taskId", "modelName", "state", "bizName", "creator", "retryCount", "finishedAt",
                                 "errorMessage"}  # fmt: skip
    assert body["data"]["taskId"] == task_id and body["data"]["state"] == 3
    assert body["data"]["errorMessage"] == AsynchTask.objects.get(id=task_id).error_message


def test_a_receiver_answering_500_twice_then_200_gets_the_same_webhook_id_three_times(biz, receiver, model_server):
    receiver.behaviour = lambda call, index: (500 if index < 2 else 200, {}, 0.0)
    secret = create_endpoint(biz, receiver.url)["secret"]
    finished_task(biz, model_server)
    assert [send_all()[0] for _ in range(3)] == ["pending", "pending", "delivered"]
    assert len({call.headers["webhook-id"] for call in receiver.calls}) == 1 and len(receiver.calls) == 3
    assert [verified(secret, call)["type"] for call in receiver.calls] == ["task.succeeded"] * 3
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 3, 200)
    codes = list(DeliveryAttempt.objects.filter(delivery=delivery).values_list("status_code", "outcome"))
    assert codes == [(500, "retried"), (500, "retried"), (200, "delivered")]
    listed = biz.get("/webhook/listDeliveries").json()["results"]
    assert [set(item) for item in listed] == [DELIVERY_KEYS]
    assert listed[0]["status"] == "delivered" and listed[0]["attempts"] == 3 and listed[0]["deliveredAt"]
    assert listed[0]["eventId"] == receiver.calls[0].headers["webhook-id"] and listed[0]["nextAttemptAt"] is None


@contextlib.contextmanager
def redirecting_to(location: str) -> Iterator[str]:
    """A receiver on 127.0.0.1 that answers every post with ``302`` and ``Location``."""

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks"
    finally:
        server.shutdown()
        server.server_close()


def test_a_3xx_is_a_failure_never_followed_and_the_schedule_ends_in_failed(biz, model_server, settings):
    settings.WEBHOOK_RETRY_SCHEDULE = "0s"
    with local_server() as elsewhere, redirecting_to(elsewhere.url + "/caught") as redirector:
        create_endpoint(biz, redirector)
        finished_task(biz, model_server)
        assert [send_all()[0] for _ in range(2)] == ["pending", "failed"]
        assert elsewhere.calls == []  # the Location was never followed
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("failed", 2, 302)
    listed = biz.get("/webhook/listDeliveries", {"status": "failed"}).json()["results"]
    assert [item["deliveryId"] for item in listed] == [delivery.id] and listed[0]["lastError"] == "HTTP 302"
    assert biz.get("/webhook/listDeliveries", {"status": "delivered"}).json()["results"] == []
    assert answer(biz.get("/webhook/listDeliveries", {"status": "lost"})) == ("VALIDATION_ERROR", 400)


def test_during_a_rotation_both_secrets_verify_and_after_the_overlap_only_the_new_one(
    biz, receiver, model_server, settings
):
    created = create_endpoint(biz, receiver.url)
    old = created["secret"]
    rotated = biz.post("/webhook/rotateSecret", {"endpointId": created["endpointId"]})
    assert rotated.status_code == 200 and set(rotated.json()) == {"endpointId", "secret"}
    new = rotated.json()["secret"]
    assert new != old and new.startswith("whsec_")
    finished_task(biz, model_server)
    send_all()
    call = receiver.calls[0]
    assert len(call.headers["webhook-signature"].split(" ")) == 2
    assert verified(old, call) == verified(new, call)
    # The overlap over: the old secret no longer signs.
    WebhookEndpoint.objects.update(previous_secret_until=timezone.now() - dt.timedelta(seconds=1))
    assert biz.post("/webhook/replay", {"deliveryId": Delivery.objects.get().id}).status_code == 202
    send_all()
    call = receiver.calls[1]
    assert verified(new, call)["type"] == "task.succeeded"
    with pytest.raises(WebhookVerificationError):
        verified(old, call)


def test_replay_sends_a_delivery_again_with_its_original_webhook_id(biz, receiver, model_server):
    create_endpoint(biz, receiver.url)
    finished_task(biz, model_server)
    send_all()
    delivery = Delivery.objects.get()
    response = biz.post("/webhook/replay", {"deliveryId": delivery.id})
    assert response.status_code == 202 and response.json() == {"deliveryId": delivery.id, "eventId": delivery.event_id}
    assert send_all() == ["delivered"]
    assert [call.headers["webhook-id"] for call in receiver.calls] == [delivery.event_id] * 2
    assert answer(biz.post("/webhook/replay", {"deliveryId": "dlv_nope"})) == ("NOT_FOUND", 404)


def test_an_endpoint_whose_host_is_no_longer_allowed_is_refused_at_send_without_a_request(
    biz, receiver, model_server, settings
):
    create_endpoint(biz, receiver.url)
    finished_task(biz, model_server)
    settings.WEBHOOK_ALLOWED_HOSTS = []  # 127.0.0.1 is loopback: allowed only while listed
    assert send_all() == ["pending"]
    assert receiver.calls == []
    delivery = Delivery.objects.get()
    assert delivery.last_status_code is None and delivery.last_error.startswith("refused")
    assert "127.0.0.1" not in delivery.last_error and str(receiver.server.server_address[1]) not in delivery.last_error
    listed = biz.get("/webhook/listDeliveries").json()["results"][0]
    assert listed["lastStatusCode"] is None and listed["lastError"].startswith("refused")
    assert listed["status"] == "pending" and listed["nextAttemptAt"] is not None


def test_a_stored_url_whose_name_resolves_to_loopback_is_refused_at_send(biz, model_server, settings):
    # Saved as a name no resolver knows (accepted: each connection checks again); the
    # row then names one that resolves to 127.0.0.1 when sent, however it got there.
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    endpoint = create_endpoint(biz, "https://hooks.invalid/in")
    WebhookEndpoint.objects.filter(id=endpoint["endpointId"]).update(url="https://localhost:9/in")
    finished_task(biz, model_server)
    assert send_all() == ["pending"]
    delivery = Delivery.objects.get()
    assert delivery.last_error.startswith("refused") and "loopback" in delivery.last_error
    assert delivery.last_status_code is None and "localhost" not in delivery.last_error


def test_an_endpoint_failing_every_try_for_the_days_setting_is_disabled(biz, receiver, model_server, settings):
    receiver.behaviour = lambda call, index: (503, {}, 0.0)
    endpoint_id = create_endpoint(biz, receiver.url)["endpointId"]
    finished_task(biz, model_server)
    send_all()
    endpoint = WebhookEndpoint.objects.get(id=endpoint_id)
    assert endpoint.enabled and endpoint.failing_since is not None  # failing, not for long yet
    WebhookEndpoint.objects.update(
        failing_since=timezone.now() - dt.timedelta(days=settings.WEBHOOK_DISABLE_AFTER_DAYS)
    )
    send_all()
    endpoint.refresh_from_db()
    assert not endpoint.enabled and endpoint.disabled_reason
    assert send_all() == ["dropped"] and len(receiver.calls) == 2  # nothing more is sent to it
    listed = biz.get("/webhook/listEndpoints").json()["results"][0]
    assert listed["enabled"] is False


def test_a_delivered_try_forgets_an_endpoints_failures(biz, receiver, model_server):
    receiver.behaviour = lambda call, index: (500 if index == 0 else 200, {}, 0.0)
    endpoint_id = create_endpoint(biz, receiver.url)["endpointId"]
    finished_task(biz, model_server)
    send_all()
    assert WebhookEndpoint.objects.get(id=endpoint_id).failing_since is not None
    send_all()
    assert WebhookEndpoint.objects.get(id=endpoint_id).failing_since is None


def test_a_rolled_back_finish_writes_no_delivery(biz, receiver, model_server):
    create_endpoint(biz, receiver.url)
    task_id = finished_task(biz, model_server)
    Delivery.objects.all().delete()
    with pytest.raises(RuntimeError), transaction.atomic():
        assert events.task_finished(task_id=task_id, now=timezone.now())
        raise RuntimeError
    assert not Delivery.objects.exists()


# --- cheap polling ---------------------------------------------------------------------------------------


def test_get_task_result_with_its_etag_answers_304_until_the_task_moves(biz, model_server):
    make_model("hooked", base_url=model_server.url)
    task_id = biz.create_task("hooked").json()["taskId"]
    first = biz.get("/task/getTaskResult", {"taskId": task_id})
    tag = first["ETag"]
    assert first.status_code == 200 and tag.startswith('"') and not tag.startswith("W/")
    again = biz.client.get("/task/getTaskResult", {"taskId": task_id}, HTTP_IF_NONE_MATCH=tag)
    assert again.status_code == 304 and again.content == b"" and again["ETag"] == tag
    run_queue()
    moved = biz.client.get("/task/getTaskResult", {"taskId": task_id}, HTTP_IF_NONE_MATCH=tag)
    assert moved.status_code == 200 and moved.json()["state"] == 2 and moved["ETag"] != tag
    # A succeeded task's link is signed afresh each time; its tag stays.
    tag = moved["ETag"]
    assert (
        biz.client.get("/task/getTaskResult", {"taskId": task_id}, HTTP_IF_NONE_MATCH=f'"x", {tag}').status_code == 304
    )
    biz.post("/task/getTaskBatch", {"taskIds": [task_id]})  # 2 -> 4
    assert biz.client.get("/task/getTaskResult", {"taskId": task_id}, HTTP_IF_NONE_MATCH=tag).status_code == 200


def _counted(outcome: str) -> float:
    response = Client().get("/metrics")
    assert response.status_code == 200
    return Scrape.parse(response.content.decode()).value("asynch_webhook_deliveries_total", outcome=outcome)


def test_every_try_is_counted_by_its_outcome(biz, receiver, model_server, settings):
    settings.WEBHOOK_RETRY_SCHEDULE = "0s"
    before = {outcome: _counted(outcome) for outcome in ("delivered", "retried", "failed")}
    receiver.behaviour = lambda call, index: (200 if index == 2 else 500, {}, 0.0)
    create_endpoint(biz, receiver.url)
    create_endpoint(biz, receiver.url + "/second")
    finished_task(biz, model_server)
    assert send_all() == ["pending", "pending"]  # both answered 500, a try left: retried
    assert sorted(send_all()) == ["delivered", "failed"]  # one 200; one 500 with no try left
    after = {outcome: _counted(outcome) - before[outcome] for outcome in before}
    assert after == {"delivered": 1, "retried": 2, "failed": 1}


# --- the admin ------------------------------------------------------------------------------------------


def test_the_replay_action_needs_its_own_permission(biz, receiver, model_server):
    create_endpoint(biz, receiver.url)
    finished_task(biz, model_server)
    send_all()
    delivery = Delivery.objects.get()
    viewer = UserFactory(is_staff=True)
    viewer.user_permissions.add(*Permission.objects.filter(codename__in=["view_delivery", "change_delivery"]))
    client = Client()
    client.force_login(viewer)
    page = client.get("/admin/delivery/delivery/")
    assert page.status_code == 200 and delivery.id in page.content.decode() and "replay" not in page.content.decode()
    form = {"action": "replay", "_selected_action": [delivery.id]}
    assert client.post("/admin/delivery/delivery/", form).status_code == 403
    viewer.user_permissions.add(Permission.objects.get(codename="replay_delivery"))
    client.force_login(viewer)
    assert "replay" in client.get("/admin/delivery/delivery/").content.decode()
    assert client.post("/admin/delivery/delivery/", form).status_code == 302
    assert send_all() == ["delivered"]
    assert [call.headers["webhook-id"] for call in receiver.calls] == [delivery.event_id] * 2


def test_the_admin_lists_endpoints_and_never_shows_a_secret(biz, receiver):
    created = create_endpoint(biz, receiver.url)
    operator = Client()
    operator.force_login(UserFactory(is_staff=True, is_superuser=True))
    for url in ("/admin/delivery/webhookendpoint/", f"/admin/delivery/webhookendpoint/{created['endpointId']}/change/"):
        page = operator.get(url)
        assert page.status_code == 200 and created["endpointId"] in page.content.decode()
        assert created["secret"].removeprefix("whsec_") not in page.content.decode()
        assert WebhookEndpoint.objects.get().secret_encrypted not in page.content.decode()


def test_a_webhook_secret_moves_to_the_newest_key_with_rotate_encryption_keys(biz, receiver, settings):
    old_key, new_key = (base64.b64encode(bytes([n]) * 32).decode() for n in (1, 2))
    settings.CREDENTIAL_ENCRYPTION_KEYS = [f"old:{old_key}"]
    secret = create_endpoint(biz, receiver.url)["secret"]
    assert WebhookEndpoint.objects.get().secret_encrypted.startswith("v1:old:")
    settings.CREDENTIAL_ENCRYPTION_KEYS = [f"new:{new_key}", f"old:{old_key}"]
    column = next(c for c in keyring.registered_columns() if c.name == "webhook endpoints' secrets")
    assert keyring.rotate(column).rotated == 1
    stored = WebhookEndpoint.objects.get().secret_encrypted
    assert stored.startswith("v1:new:") and keyring.open_text(stored, context=webhooks.SECRET_CONTEXT) == secret


def test_a_task_the_cleaner_fails_as_stuck_with_no_retry_left_is_told_as_failed(biz, receiver, model_server):
    secret = create_endpoint(biz, receiver.url)["secret"]
    make_model("stuck", base_url=model_server.url, retry_times=0)
    task_id = biz.create_task("stuck").json()["taskId"]
    claimed = worker.tasks_claim(calls=worker.model_calls(), limit=5, worker_id="dead-worker")
    assert [item.task.id for item in claimed] == [task_id]  # claimed, then its worker died
    AsynchTask.objects.filter(id=task_id).update(lease_until=timezone.now() - dt.timedelta(seconds=1))
    assert services.tasks_clean(by_hand=True)["failedStuck"] == 1
    assert send_all() == ["delivered"]
    body = verified(secret, receiver.calls[0])
    assert body["type"] == "task.failed" and body["data"]["taskId"] == task_id
    assert body["data"]["errorMessage"] == AsynchTask.objects.get(id=task_id).error_message


def _failed_with_retries_left(client: TenantClient, model_server: ModelServer, model: str, count: int) -> list[str]:
    model_server.behaviour = lambda call, index: (500, {"error": "no"}, 0.0)
    make_model(model, base_url=model_server.url, retry_times=3)
    ids = [client.create_task(model, {"n": n}).json()["taskId"] for n in range(count)]
    run_queue()
    assert set(AsynchTask.objects.filter(id__in=ids).values_list("state", "retry_count")) == {(TaskState.FAILED, 0)}
    assert not Delivery.objects.exists()  # each had a retry left: nothing told yet
    return ids


def test_a_model_deleted_tells_its_failed_tasks_that_had_a_retry_left_that_they_failed(biz, receiver, model_server):
    secret = create_endpoint(biz, receiver.url)["secret"]
    ids = _failed_with_retries_left(biz, model_server, "going", 2)
    make_model("staying", base_url=model_server.url, retry_times=3)
    biz.create_task("staying")
    run_queue()  # a failed task of another model keeps its retry
    assert tenant_client("ops", is_admin=True).post("/model/deleteModel", {"modelName": "going"}).status_code == 200
    assert send_all() == ["delivered", "delivered"]
    told = [verified(secret, call) for call in receiver.calls]
    assert sorted(body["data"]["taskId"] for body in told) == sorted(ids)
    assert {(body["type"], body["data"]["state"], body["data"]["modelName"]) for body in told} == {
        ("task.failed", 3, "going")
    }


def test_retry_times_lowered_tells_the_failed_tasks_left_without_a_retry_and_no_others(biz, receiver, model_server):
    create_endpoint(biz, receiver.url)
    ops = tenant_client("ops", is_admin=True)
    _, spent = _failed_with_retries_left(biz, model_server, "lowered", 2)
    AsynchTask.objects.filter(id=spent).update(retry_count=1)  # one retry already spent

    def update(retry_times: int) -> None:
        changed = ops.post("/model/updateModel", {"modelName": "lowered", "retryTimes": retry_times})
        assert changed.status_code == 200, changed.content

    # Raised, or lowered to one the tasks still have left: nothing to tell.
    for retry_times in (5, 2):
        update(retry_times)
        assert not Delivery.objects.exists()
    # Lowered to 1: the task that spent its retry has none left now; the other still has one.
    update(1)
    assert list(Delivery.objects.values_list("payload__about", flat=True)) == [spent]


def test_models_deleted_from_the_admins_list_tell_their_failed_tasks_too(biz, receiver, model_server, admin_client):
    create_endpoint(biz, receiver.url)
    ids = _failed_with_retries_left(biz, model_server, "listed", 1)
    model = AsynchModel.objects.get(model_name="listed")
    response = admin_client.post(
        "/admin/asynch/asynchmodel/",
        {"action": "delete_selected", "_selected_action": [model.pk], "post": "yes"},
    )
    assert response.status_code == 302 and not AsynchModel.objects.filter(model_name="listed").exists()
    assert list(Delivery.objects.values_list("payload__about", flat=True)) == ids
