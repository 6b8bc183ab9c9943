"""The learning API is not a way round the platform's protection: it is throttled per
user by ``USER_THROTTLE_RATE`` as ``/ai/*`` is, and a user holds at most
``LEARNING_MAX_OBJECTS_PER_USER`` objects of each kind (``409 LEARNING_LIMIT_EXCEEDED``)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from config.errors import DomainError, ErrorCode
from learning import services
from learning.models import KnowledgeBase, KnowledgePoint, Material, StudyRecord
from tests.support.api import error_code
from tests.support.factories import UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def _client(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def _refused_for_the_limit(response) -> None:
    assert response.status_code == 409, response.json()
    body = response.json()["error"]
    assert body["code"] == "LEARNING_LIMIT_EXCEEDED" and body["retryable"] is False and "at most 2" in body["message"]


def test_a_user_holds_at_most_the_limit_of_each_kind_and_a_delete_makes_room(settings):
    settings.LEARNING_MAX_OBJECTS_PER_USER = 2
    user, other = UserFactory(), UserFactory()
    api = _client(user)
    bases = [api.post("/learning/knowledge-bases", {"name": f"kb {n}"}, format="json") for n in range(2)]
    assert [response.status_code for response in bases] == [201, 201]
    _refused_for_the_limit(api.post("/learning/knowledge-bases", {"name": "one too many"}, format="json"))
    kb = bases[0].json()["id"]
    for path, body in (
        ("/learning/materials", {"knowledgeBaseId": kb, "title": "m"}),
        ("/learning/knowledge-points", {"knowledgeBaseId": kb, "name": "p"}),
    ):
        assert [api.post(path, body, format="json").status_code for _ in range(2)] == [201, 201]
        _refused_for_the_limit(api.post(path, body, format="json"))
    point = KnowledgePoint.objects.filter(user=user).first().id
    record = {"knowledgePointId": point, "isCorrect": True, "score": 80}
    assert [api.post("/learning/study-records", record, format="json").status_code for _ in range(2)] == [201, 201]
    _refused_for_the_limit(api.post("/learning/study-records", record, format="json"))
    counts = [
        model.objects.filter(user=user).count() for model in (KnowledgeBase, Material, KnowledgePoint, StudyRecord)
    ]
    assert counts == [2, 2, 2, 2]
    # Another user's objects are theirs to count; deleting one makes room for one more.
    assert _client(other).post("/learning/knowledge-bases", {"name": "mine"}, format="json").status_code == 201
    assert api.delete(f"/learning/knowledge-bases/{bases[1].json()['id']}").status_code == 204
    assert api.post("/learning/knowledge-bases", {"name": "room again"}, format="json").status_code == 201


def test_the_services_refuse_past_the_limit_too(settings):
    settings.LEARNING_MAX_OBJECTS_PER_USER = 1
    user = UserFactory()
    base = services.knowledge_base_create(user=user, name="kb")
    with pytest.raises(DomainError) as refused:
        services.knowledge_base_create(user=user, name="kb 2")
    assert refused.value.code == ErrorCode.LEARNING_LIMIT_EXCEEDED
    services.material_create(user=user, knowledge_base_id=base.id, title="m")
    with pytest.raises(DomainError) as refused:
        services.material_create(user=user, knowledge_base_id=base.id, title="m 2")
    assert refused.value.code == ErrorCode.LEARNING_LIMIT_EXCEEDED


def test_a_user_over_the_rate_on_the_learning_api_gets_429_with_retry_after(settings, monkeypatch):
    settings.USER_THROTTLE_RATE = "3/min"
    monkeypatch.setattr("quotas.throttles.clock", lambda: 1_800_000_115.0)  # mid-window, 5 s before its end
    busy, quiet = _client(UserFactory()), _client(UserFactory())
    statuses = [
        busy.get("/learning/knowledge-bases").status_code,
        busy.post("/learning/knowledge-bases", {"name": "kb"}, format="json").status_code,
        busy.get("/learning/study-records").status_code,
    ]
    assert statuses == [200, 201, 200]
    limited = busy.get("/learning/materials")
    assert limited.status_code == 429 and error_code(limited) == "RATE_LIMITED"
    assert limited.json()["error"]["retryable"] is True and limited["Retry-After"] == "5"
    assert busy.patch("/learning/knowledge-bases/anything", {"name": "x"}, format="json").status_code == 429
    assert quiet.get("/learning/knowledge-bases").status_code == 200
