"""Webhooks with real Celery worker processes (``celery -A config worker`` on the
Redis broker of the test run): the model-asynch worker finishes the tasks, the
deliveries written with each finish are sent after commit by the outbox's send task,
a retry goes out when the dispatcher (beat's message) finds it due, and a receiver on
127.0.0.1 (listed in ``WEBHOOK_ALLOWED_HOSTS``) verifies every delivery with the
``standardwebhooks`` library's verifier (contract section 11.3)."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from standardwebhooks.webhooks import Webhook

from asynch.models import AsynchTask, TaskState
from delivery.models import Delivery, DeliveryStatus
from tests.support.asynch_fixtures import local_server, make_model, model_server_fixture, tenant_client  # noqa: F401
from tests.support.celery_workers import dispatch_deliveries, kick, needs_postgres_and_redis, workers_fixture  # noqa: F401
from tests.support.runtime_fixtures import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("needs_postgres_and_redis"),
]


def test_finished_tasks_arrive_once_per_endpoint_verified_and_a_flaky_receiver_gets_one_webhook_id_three_times(
    workers, model_server, settings
):
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    model_server.behaviour = lambda call, index: (
        (500, {"no": 1}, 0.0) if call.json.get("fail") else (200, {"ok": 1}, 0.0)
    )
    make_model("hooked", base_url=model_server.url, retry_times=0)
    biz = tenant_client("biz")
    workers.start("w1", WEBHOOK_ALLOWED_HOSTS="127.0.0.1", WEBHOOK_RETRY_SCHEDULE="0.2s,0.2s,0.2s",
                  ASYNCH_PUBLIC_BASE_URL="https://results.example")  # fmt: skip
    with local_server() as a, local_server() as b, local_server() as flaky:
        for server in (a, b):
            server.behaviour = lambda call, index: (204, b"", 0.0)
        flaky.behaviour = lambda call, index: (500 if index < 2 else 200, {}, 0.0)
        servers = {"a": a, "b": b, "flaky": flaky}
        secrets = {}
        for name, events in (("a", None), ("b", None), ("flaky", ["task.succeeded"])):
            body = {"url": servers[name].url + "/hooks", **({"events": events} if events else {})}
            secrets[name] = biz.post("/webhook/createEndpoint", body).json()["secret"]
        workers.wait_ready()
        succeeded = biz.create_task("hooked", {"fail": False}, bizName="orders").json()["taskId"]
        failed = biz.create_task("hooked", {"fail": True}).json()["taskId"]
        kick()
        wait_for(
            lambda: (
                set(AsynchTask.objects.filter(id__in=[succeeded, failed]).values_list("state", flat=True))
                == {TaskState.SUCCEEDED, TaskState.FAILED}
            ),
            timeout=60,
            what="both tasks to finish",
        )

        def all_delivered() -> bool:
            if len(flaky.calls) < 3:
                dispatch_deliveries()  # beat's pass: the flaky receiver's retry is due
                time.sleep(0.25)
            rows = list(Delivery.objects.values_list("status", flat=True))
            return len(rows) == 5 and set(rows) == {DeliveryStatus.DELIVERED}

        wait_for(all_delivered, timeout=60, every=0.1, what="five deliveries delivered")
        dispatch_deliveries()  # nothing due: nothing more is sent
        time.sleep(0.5)
        calls = {name: list(server.calls) for name, server in servers.items()}

    for server, received in calls.items():
        for call in received:
            assert call.path == "/hooks"
            Webhook(secrets[server]).verify(call.body, call.headers)  # raises unless signed with its secret
    bodies = {server: [Webhook(secrets[server]).verify(c.body, c.headers) for c in received]
              for server, received in calls.items()}  # fmt: skip
    for name in ("a", "b"):
        assert Counter(body["data"]["taskId"] for body in bodies[name]) == {succeeded: 1, failed: 1}
        by_type = {body["type"]: body for body in bodies[name]}
        assert by_type["task.succeeded"]["data"]["ossFile"].startswith("https://results.example/task/download/")
        assert by_type["task.succeeded"]["data"]["bizName"] == "orders"
        assert by_type["task.failed"]["data"]["state"] == 3 and by_type["task.failed"]["data"]["errorMessage"]
    assert [body["data"]["taskId"] for body in bodies["flaky"]] == [succeeded] * 3
    ids_of = {server: {c.headers["webhook-id"] for c in received if succeeded.encode() in c.body}
              for server, received in calls.items()}  # fmt: skip
    assert ids_of["a"] == ids_of["b"] == ids_of["flaky"] and len(ids_of["a"]) == 1  # one event, one id everywhere
    assert sorted(Delivery.objects.values_list("attempts", flat=True)) == [1, 1, 1, 1, 3]
