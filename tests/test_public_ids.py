"""Opaque user ids: no response of any endpoint carries a user's
integer key; ``targetId: "me"`` names the caller; the ids cost no query per row."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.selectors import public_id_of
from ai_jobs.models import AiRuntimeJob
from quotas import selectors as quota_selectors
from tests.support.api import error_code
from tests.support.api_walk import RUNTIME_ID, World, build_world
from tests.support.factories import JobFactory, UserFactory
from tests.support.user_api import Learner

pytestmark = pytest.mark.django_db

USER_KEYS = {"userId", "user_id", "user", "userid", "ownerId", "owner", "creator", "sub", "learnerId"}
JWT = re.compile(r"^[A-Za-z0-9_-]+\.([A-Za-z0-9_-]+)\.[A-Za-z0-9_-]+$")
# Bodies that take each operation as far as it goes (others are sent {}).
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/ai/jobs"): {"jobType": "next_action_planning", "targetType": "user", "targetId": "me"},
    ("post", "/auth/register"): {"username": "walk-newcomer", "password": "correct-horse-battery-9"},
    ("post", "/auth/token"): {"username": "walk-learner", "password": "pw-123456"},
    ("post", "/internal/runtime/jobs/poll"): {"capabilities": ["weak_point_analysis", "next_action_planning"]},
    ("post", "/internal/runtime/jobs/claim"): {"capabilities": ["next_action_planning"]},
    ("post", "/internal/runtime/jobs/{job_id}/result"): {
        "attemptNo": 1,
        "output": {"weakPoints": []},
        "usage": {"promptTokens": 10, "completionTokens": 5},
    },
    ("post", "/internal/runtime/jobs/{job_id}/invocation-logs"): {
        "logs": [{"attemptNo": 1, "requestId": "walk-1", "totalTokens": 3, "errorCode": "MODEL_TIMEOUT"}]
    },
    ("post", "/internal/runtime/jobs/{job_id}/fail"): {"attemptNo": 1, "errorCode": "MODEL_TIMEOUT"},
    ("put", "/ai/learning-profile"): {"goals": "g", "level": "l", "preferredStudyTime": "t", "preferences": {}},
    ("patch", "/ai/settings"): {"timezone": "Asia/Shanghai"},
    ("post", "/learning/knowledge-bases"): {"name": "Another"},
    ("post", "/model/createModel"): {"modelName": "walk-model-2", "baseUrl": "http://127.0.0.1:9"},
    ("post", "/model/updateModel"): {"modelName": "walk-model", "remark": "r"},
    ("post", "/model/deleteModel"): {"modelName": "walk-model-2"},
    ("post", "/task/createTask"): {"modelName": "walk-model", "requestPayload": {"q": 2}},
}
# Order: the runtime's calls in the order of a job's life; what deletes, last.
ORDER = ["poll", "lock", "heartbeat", "snapshot", "credential", "invocation-logs", "result", "fail", "claim"]


def _rank(method: str, path: str) -> tuple[int, int, str]:
    last = path.rstrip("/").rsplit("/", 1)[-1]
    step = ORDER.index(last) if path.startswith("/internal/") and last in ORDER else -1
    return (1 if method == "delete" or "deleteModel" in path else 0, step, path)


def _client(world: World, path: str) -> APIClient:
    client = APIClient()
    if path.startswith("/internal/"):
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.runtime_token}", HTTP_X_RUNTIME_INSTANCE_ID=RUNTIME_ID)
    elif path.startswith(("/ai/", "/learning/")):
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.learner_token}")
    elif path.startswith(("/model/", "/task/", "/webhook/")):
        client.credentials(HTTP_X_API_KEY=world.tenant_key)
    return client


def _fill(world: World, path: str) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "object_id":
            return world.ids[path.split("/")[2]]
        if path.endswith("/cancel"):  # the runtime's calls need the other pending job
            return world.ids["cancel_job"]
        return world.ids.get(name, "x")

    return re.sub(r"\{([^}]+)\}", value, path)


def _integer_user_ids(body: Any, user_ids: set[int], where: str = "") -> list[str]:
    """Every place in ``body`` where a user is named by an integer (or a JWT names one)."""
    found: list[str] = []
    if isinstance(body, dict):
        kind = body.get("targetType"), body.get("actionTargetType")
        for key, value in body.items():
            here = f"{where}.{key}"
            names_user = (
                key in USER_KEYS
                or (key == "targetId" and kind[0] == "user")
                or (key == "actionTargetId" and kind[1] == "user")
            )
            if names_user and value is not None and not (isinstance(value, str) and value.startswith("usr_")):
                if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
                    found.append(f"{here}={value!r}")
                elif key not in {"creator", "user"}:  # a user named neither by key nor by public id
                    found.append(f"{here}={value!r} (not a public id)")
            found += _integer_user_ids(value, user_ids, here)
    elif isinstance(body, list):
        for index, item in enumerate(body):
            found += _integer_user_ids(item, user_ids, f"{where}[{index}]")
    elif isinstance(body, str) and (token := JWT.match(body)):
        payload = token.group(1) + "=" * (-len(token.group(1)) % 4)
        claims = json.loads(base64.urlsafe_b64decode(payload))
        found += [
            f"{where} (JWT).{k}={v!r}" for k, v in claims.items() if k in USER_KEYS and not str(v).startswith("usr_")
        ]
    return found


def test_no_response_of_any_endpoint_carries_an_integer_user_id(settings):
    settings.ALLOW_REGISTRATION = True  # so that registration answers for real
    world = build_world()
    user_ids = set(get_user_model().objects.values_list("pk", flat=True))
    schema = APIClient().get("/api/schema", {"format": "json"}, HTTP_ACCEPT="application/json").json()
    operations = sorted(
        ((method, path) for path, item in schema["paths"].items() for method in item if method != "parameters"),
        key=lambda op: _rank(*op),
    )
    assert len(operations) >= 60
    walked, bodies = [], 0
    for method, path in operations:
        query = {}
        if path in ("/model/getModel",):
            query = {"modelName": "walk-model"}
        elif path == "/task/getTaskResult":
            query = {"taskId": world.ids["taskId"]}
        url = _fill(world, path)
        call = getattr(_client(world, path), method)
        response = (
            call(url, query, format="json")
            if method == "get"
            else call(url, BODIES.get((method, path), {}), format="json")
        )
        assert response.status_code < 500, (method, path, response.content[:300])
        walked.append((method, path, response.status_code))
        if response.get("Content-Type", "").startswith("application/json") and response.content:
            found = _integer_user_ids(response.json(), user_ids)
            assert not found, (method, path, found)
            bodies += 1
    assert len(walked) == len(operations) and bodies >= 55
    succeeded = {(m, p) for m, p, status in walked if status < 300}
    # The ones that name users answered for real, not only with errors.
    for needed in [
        ("get", "/ai/profile"),
        ("get", "/ai/jobs"),
        ("post", "/ai/jobs"),
        ("get", "/ai/recommendations"),
        ("get", "/ai/notifications"),
        ("post", "/internal/runtime/jobs/poll"),
        ("post", "/internal/runtime/jobs/claim"),
        ("get", "/internal/runtime/jobs/{job_id}/snapshot"),
        ("post", "/auth/register"),
        ("post", "/auth/token"),
    ]:
        assert needed in succeeded, (needed, [w for w in walked if (w[0], w[1]) == needed])


def test_target_id_me_names_the_caller_and_only_their_public_id_does_too():
    learner, other = Learner(), UserFactory()
    me = learner.job(targetId="me")
    assert me.status_code == 201
    body = me.json()
    assert body["targetId"] == body["userId"] == public_id_of(learner.user)
    again = learner.job(targetId=public_id_of(learner.user))
    assert again.status_code == 201 and again.json()["targetId"] == body["targetId"]
    for target_id in (str(learner.user.pk), public_id_of(other), "usr_nobody"):
        refused = learner.job(targetId=target_id)
        assert refused.status_code == 404 and error_code(refused) == "NOT_FOUND", target_id
    profile = learner.get("/ai/profile").json()
    assert profile["userId"] == body["userId"]


def test_listing_jobs_costs_the_same_statements_for_one_job_or_twenty(runtime, monkeypatch):
    monkeypatch.setattr(quota_selectors, "BREAKER_STATE_MAX_AGE_SECONDS", 3600)  # its hint read once, not by chance
    learner = Learner()
    JobFactory(user=learner.user)

    def statements(call) -> int:
        with CaptureQueriesContext(connection) as queries:
            response = call()
            assert response.status_code == 200
        return len(queries)

    learner.get("/ai/jobs"), runtime.post("jobs/poll", {"capabilities": ["learning_state_analysis"]})  # warm
    one_list = statements(lambda: learner.get("/ai/jobs"))
    one_poll = statements(lambda: runtime.post("jobs/poll", {"capabilities": ["learning_state_analysis"]}))
    others = [UserFactory() for _ in range(5)]
    JobFactory.create_batch(19, user=learner.user)
    for user in others:
        JobFactory(user=user)
    assert statements(lambda: learner.get("/ai/jobs")) == one_list
    assert (
        statements(lambda: runtime.post("jobs/poll", {"capabilities": ["learning_state_analysis"], "limit": 50}))
        == one_poll
    )
    claimed = runtime.claim(limit=50).json()["jobs"]
    owners = {job["userId"] for job in claimed}
    assert owners == {public_id_of(user) for user in [learner.user, *others]}
    assert AiRuntimeJob.objects.filter(status="locked").count() == 25
