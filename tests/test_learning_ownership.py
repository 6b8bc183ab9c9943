"""Object-level authorization of /learning/*: another user's object answers 404 exactly
as a missing one and changes nothing, whether read, changed, deleted, created under or
moved under."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from learning.models import KnowledgePoint, Material, StudyRecord
from tests.support.api import error_code, user_client
from tests.support.learning_factories import MaterialFactory, StudyRecordFactory, others_objects

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(user) -> APIClient:
    return user_client(user)


PATCHES = {
    "knowledge-bases": {"name": "hijacked"},
    "materials": {"title": "hijacked"},
    "knowledge-points": {"name": "hijacked"},
    "study-records": {"score": 1},
}


@pytest.mark.parametrize("resource", list(PATCHES))
def test_another_users_object_answers_404_like_a_missing_one_and_changes_nothing(client, other_user, resource):
    obj = others_objects(other_user)[resource]
    model = type(obj)
    before = model.objects.values().get(pk=obj.pk)
    for response in (
        client.get(f"/learning/{resource}/{obj.pk}"),
        client.patch(f"/learning/{resource}/{obj.pk}", PATCHES[resource], format="json"),
        client.delete(f"/learning/{resource}/{obj.pk}"),
    ):
        assert response.status_code == 404 and error_code(response) == "NOT_FOUND"
        missing = client.get(f"/learning/{resource}/{obj.pk[:-1]}x")
        assert missing.status_code == 404 and missing.json()["error"].keys() == response.json()["error"].keys()
    assert model.objects.values().get(pk=obj.pk) == before
    listed = client.get(f"/learning/{resource}").json()
    assert listed == {"results": [], "next": None}


def test_creating_under_another_users_knowledge_base_or_point_answers_404(client, user, other_user):
    others = others_objects(other_user)
    kb, kp = others["knowledge-bases"], others["knowledge-points"]
    counts = (Material.objects.count(), KnowledgePoint.objects.count(), StudyRecord.objects.count())
    for path, body in (
        ("materials", {"knowledgeBaseId": kb.id, "title": "x"}),
        ("knowledge-points", {"knowledgeBaseId": kb.id, "name": "x"}),
        ("study-records", {"knowledgePointId": kp.id, "isCorrect": True}),
        ("materials", {"knowledgeBaseId": "kb_missing", "title": "x"}),
        ("study-records", {"knowledgePointId": "kp_missing", "isCorrect": True}),
    ):
        response = client.post(f"/learning/{path}", body, format="json")
        assert response.status_code == 404 and error_code(response) == "NOT_FOUND", path
    assert (Material.objects.count(), KnowledgePoint.objects.count(), StudyRecord.objects.count()) == counts


def test_moving_an_object_under_another_users_parent_answers_404_and_changes_nothing(client, user, other_user):
    others = others_objects(other_user)
    material = MaterialFactory(knowledge_base__user=user)
    record = StudyRecordFactory(knowledge_point__knowledge_base__user=user)
    point = record.knowledge_point
    for path, body in (
        (f"materials/{material.id}", {"knowledgeBaseId": others["knowledge-bases"].id, "title": "moved"}),
        (f"knowledge-points/{point.id}", {"knowledgeBaseId": others["knowledge-bases"].id, "name": "moved"}),
        (f"study-records/{record.id}", {"knowledgePointId": others["knowledge-points"].id, "score": 3}),
    ):
        response = client.patch(f"/learning/{path}", body, format="json")
        assert response.status_code == 404 and error_code(response) == "NOT_FOUND", path
    material.refresh_from_db()
    point.refresh_from_db()
    record.refresh_from_db()
    assert material.knowledge_base.user == user and material.title != "moved"
    assert point.knowledge_base.user == user and point.name != "moved"
    assert record.knowledge_point_id == point.id and record.score == 100
