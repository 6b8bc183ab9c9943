"""/learning/* end to end through DRF's client: CRUD of the four resources,
validation in the API's error body, cursor pagination and the list filters (another
user's objects: test_learning_ownership.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from learning.models import KnowledgeBase, KnowledgePoint, Material, StudyRecord
from tests.support.api import error_code, user_client
from tests.support.factories import UserFactory
from tests.support.learning_factories import (
    KnowledgeBaseFactory,
    KnowledgePointFactory,
    MaterialFactory,
    StudyRecordFactory,
    others_objects,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(user) -> APIClient:
    return user_client(user)


def _fields(response) -> dict[str, Any]:
    body = response.json()["error"]
    assert body["code"] == "VALIDATION_ERROR" and body["retryable"] is False and body["message"]
    return body["fields"]


# --- authentication -------------------------------------------------------------------------


def test_learning_api_needs_a_user():
    response = APIClient().get("/learning/knowledge-bases")
    assert response.status_code == 401 and error_code(response) == "UNAUTHORIZED"


def test_a_real_jwt_from_auth_token_reads_the_users_own_data(user):
    KnowledgeBaseFactory(user=user, name="Mine")
    KnowledgeBaseFactory(name="Someone else's")
    tokens = APIClient().post("/auth/token", {"username": user.username, "password": "pw-123456"}, format="json")
    assert tokens.status_code == 200
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens.json()['access']}")
    response = api.get("/learning/knowledge-bases")
    assert response.status_code == 200
    assert [kb["name"] for kb in response.json()["results"]] == ["Mine"]


def test_paths_have_no_trailing_slash(client):
    assert client.get("/learning/knowledge-bases/").status_code == 404


# --- CRUD ------------------------------------------------------------------------------------


def test_knowledge_base_crud(client, user):
    created = client.post("/learning/knowledge-bases", {"name": "Algebra", "description": "Year 7"}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["id"].startswith("kb_") and body["name"] == "Algebra" and body["description"] == "Year 7"
    assert set(body) == {"id", "name", "description", "createdAt", "updatedAt"}
    kb_id = body["id"]
    assert KnowledgeBase.objects.get(id=kb_id).user == user

    assert client.get(f"/learning/knowledge-bases/{kb_id}").json() == body
    patched = client.patch(f"/learning/knowledge-bases/{kb_id}", {"name": "Algebra I"}, format="json")
    assert patched.status_code == 200
    assert patched.json()["name"] == "Algebra I" and patched.json()["description"] == "Year 7"
    assert client.get("/learning/knowledge-bases").json()["results"][0]["name"] == "Algebra I"

    assert client.delete(f"/learning/knowledge-bases/{kb_id}").status_code == 204
    missing = client.get(f"/learning/knowledge-bases/{kb_id}")
    assert missing.status_code == 404 and error_code(missing) == "NOT_FOUND"


def test_deleting_a_knowledge_base_deletes_what_is_in_it(client, user):
    record = StudyRecordFactory(knowledge_point__knowledge_base__user=user)
    kb = record.knowledge_point.knowledge_base
    MaterialFactory(knowledge_base=kb)
    assert client.delete(f"/learning/knowledge-bases/{kb.id}").status_code == 204
    assert not Material.objects.exists() and not KnowledgePoint.objects.exists() and not StudyRecord.objects.exists()


def test_material_crud(client, user):
    kb = KnowledgeBaseFactory(user=user)
    kb2 = KnowledgeBaseFactory(user=user)
    created = client.post(
        "/learning/materials", {"knowledgeBaseId": kb.id, "title": "Ch. 1", "content": "Text"}, format="json"
    )
    assert created.status_code == 201
    body = created.json()
    assert body["id"].startswith("mat_") and body["knowledgeBaseId"] == kb.id
    assert body["title"] == "Ch. 1" and body["content"] == "Text"
    mat_id = body["id"]
    assert client.get(f"/learning/materials/{mat_id}").json() == body

    patched = client.patch(
        f"/learning/materials/{mat_id}", {"knowledgeBaseId": kb2.id, "content": "More"}, format="json"
    )
    assert patched.status_code == 200
    assert patched.json()["knowledgeBaseId"] == kb2.id and patched.json()["content"] == "More"
    assert patched.json()["title"] == "Ch. 1"

    assert client.delete(f"/learning/materials/{mat_id}").status_code == 204
    assert not Material.objects.filter(id=mat_id).exists()


def test_knowledge_point_crud(client, user):
    kb = KnowledgeBaseFactory(user=user)
    created = client.post("/learning/knowledge-points", {"knowledgeBaseId": kb.id, "name": "Fractions"}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["id"].startswith("kp_") and body["knowledgeBaseId"] == kb.id
    assert body["name"] == "Fractions" and body["description"] == ""
    kp_id = body["id"]
    assert client.get(f"/learning/knowledge-points/{kp_id}").json() == body

    patched = client.patch(f"/learning/knowledge-points/{kp_id}", {"description": "Unlike denominators"}, format="json")
    assert patched.status_code == 200 and patched.json()["description"] == "Unlike denominators"

    assert client.delete(f"/learning/knowledge-points/{kp_id}").status_code == 204
    assert not KnowledgePoint.objects.filter(id=kp_id).exists()


def test_study_record_crud(client, user):
    kp = KnowledgePointFactory(knowledge_base__user=user)
    studied_at = "2026-11-01T08:30:00Z"
    created = client.post(
        "/learning/study-records",
        {"knowledgePointId": kp.id, "isCorrect": False, "score": 35.5, "durationSeconds": 90, "studiedAt": studied_at},
        format="json",
    )
    assert created.status_code == 201
    body = created.json()
    assert body["id"].startswith("rec_") and body["knowledgePointId"] == kp.id
    assert body["isCorrect"] is False and body["score"] == 35.5 and body["durationSeconds"] == 90
    assert body["studiedAt"] == studied_at
    rec_id = body["id"]
    assert client.get(f"/learning/study-records/{rec_id}").json() == body

    patched = client.patch(f"/learning/study-records/{rec_id}", {"isCorrect": True, "score": 90}, format="json")
    assert patched.status_code == 200
    assert (
        patched.json()["isCorrect"] is True
        and patched.json()["score"] == 90
        and patched.json()["durationSeconds"] == 90
    )

    assert client.delete(f"/learning/study-records/{rec_id}").status_code == 204
    assert not StudyRecord.objects.filter(id=rec_id).exists()


def test_study_record_defaults_studied_at_to_now_and_score_to_the_outcome(client, user):
    kp = KnowledgePointFactory(knowledge_base__user=user)
    before = timezone.now()
    right = client.post("/learning/study-records", {"knowledgePointId": kp.id, "isCorrect": True}, format="json")
    wrong = client.post("/learning/study-records", {"knowledgePointId": kp.id, "isCorrect": False}, format="json")
    assert right.status_code == 201 and wrong.status_code == 201
    assert right.json()["score"] == 100 and wrong.json()["score"] == 0
    assert right.json()["durationSeconds"] == 0
    assert dt.datetime.fromisoformat(right.json()["studiedAt"]) >= before


def test_put_is_not_a_method_of_learning_objects(client, user):
    kb = KnowledgeBaseFactory(user=user)
    response = client.put(f"/learning/knowledge-bases/{kb.id}", {"name": "x"}, format="json")
    assert response.status_code == 405 and error_code(response) == "METHOD_NOT_ALLOWED"


# --- validation ------------------------------------------------------------------------------------


def test_validation_errors_name_each_bad_field(client, user):
    kp = KnowledgePointFactory(knowledge_base__user=user)
    cases = [
        ("knowledge-bases", {}, "name"),
        ("knowledge-bases", {"name": ""}, "name"),
        ("knowledge-bases", {"name": "x" * 201}, "name"),
        ("knowledge-bases", {"name": "ok", "description": "x" * 5001}, "description"),
        ("knowledge-bases", {"name": "nul\x00byte"}, "name"),
        ("materials", {"title": "x"}, "knowledgeBaseId"),
        ("materials", {"knowledgeBaseId": "kb_x", "title": "x", "content": 5}, "content"),
        ("knowledge-points", {"knowledgeBaseId": kp.knowledge_base_id}, "name"),
        ("study-records", {"knowledgePointId": kp.id}, "isCorrect"),
        ("study-records", {"knowledgePointId": kp.id, "isCorrect": "perhaps"}, "isCorrect"),
        ("study-records", {"knowledgePointId": kp.id, "isCorrect": True, "score": 101}, "score"),
        ("study-records", {"knowledgePointId": kp.id, "isCorrect": True, "score": -1}, "score"),
        ("study-records", {"knowledgePointId": kp.id, "isCorrect": True, "score": "high"}, "score"),
        ("study-records", {"knowledgePointId": kp.id, "isCorrect": True, "durationSeconds": -1}, "durationSeconds"),
        ("study-records", {"knowledgePointId": kp.id, "isCorrect": True, "durationSeconds": 10**12}, "durationSeconds"),
        ("study-records", {"knowledgePointId": kp.id, "isCorrect": True, "studiedAt": "yesterday"}, "studiedAt"),
        (
            "study-records",
            {"knowledgePointId": kp.id, "isCorrect": True, "studiedAt": "2999-01-01T00:00:00Z"},
            "studiedAt",
        ),
        ("study-records", {"knowledgePointId": "k" * 65, "isCorrect": True}, "knowledgePointId"),
    ]
    for path, body, field in cases:
        response = client.post(f"/learning/{path}", body, format="json")
        assert response.status_code == 400, (path, body, response.content)
        fields = _fields(response)
        if field:
            assert field in fields, (path, body, fields)
    assert StudyRecord.objects.count() == 0 and KnowledgeBase.objects.count() == 1


def test_patch_validates_only_what_it_is_sent(client, user):
    record = StudyRecordFactory(knowledge_point__knowledge_base__user=user)
    bad = client.patch(f"/learning/study-records/{record.id}", {"score": 150}, format="json")
    assert bad.status_code == 400 and "score" in _fields(bad)
    blank = client.patch(f"/learning/knowledge-points/{record.knowledge_point_id}", {"name": ""}, format="json")
    assert blank.status_code == 400 and "name" in _fields(blank)
    record.refresh_from_db()
    assert record.score == 100
    unchanged = client.patch(f"/learning/study-records/{record.id}", {}, format="json")
    assert unchanged.status_code == 200 and unchanged.json()["score"] == 100


def test_malformed_bodies_are_400_not_500(client):
    for raw, content_type in (
        ("{not json", "application/json"),
        ('["a", "list"]', "application/json"),
        ('{"name": NaN}', "application/json"),
        ("null", "application/json"),
    ):
        response = client.generic("POST", "/learning/knowledge-bases", raw, content_type=content_type)
        assert response.status_code == 400, (raw, response.content)
        assert error_code(response) == "VALIDATION_ERROR"
    response = client.generic("POST", "/learning/knowledge-bases", "name=x", content_type="text/plain")
    assert response.status_code == 415 and error_code(response) == "UNSUPPORTED_MEDIA_TYPE"


# --- pagination and filters ---------------------------------------------------------------------------


def test_lists_are_newest_first_and_follow_the_cursor(client, user):
    base = timezone.now()
    ids = [KnowledgeBaseFactory(user=user, created_at=base - dt.timedelta(minutes=i)).id for i in range(25)]
    KnowledgeBaseFactory()  # another user's
    first = client.get("/learning/knowledge-bases?limit=10").json()
    assert [kb["id"] for kb in first["results"]] == ids[:10] and first["next"]
    second = client.get("/learning/knowledge-bases", {"limit": 10, "cursor": first["next"]}).json()
    assert [kb["id"] for kb in second["results"]] == ids[10:20]
    third = client.get("/learning/knowledge-bases", {"limit": 10, "cursor": second["next"]}).json()
    assert [kb["id"] for kb in third["results"]] == ids[20:] and third["next"] is None
    default = client.get("/learning/knowledge-bases").json()
    assert len(default["results"]) == 20


def test_bad_limit_or_cursor_is_a_validation_error(client):
    for params, field in (({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"limit": "ten"}, "limit")):
        response = client.get("/learning/materials", params)
        assert response.status_code == 400 and field in _fields(response)
    response = client.get("/learning/study-records", {"cursor": "garbage"})
    assert response.status_code == 400 and "cursor" in _fields(response)


def test_materials_and_points_filter_by_knowledge_base_and_records_by_point(client, user):
    kb1, kb2 = KnowledgeBaseFactory(user=user), KnowledgeBaseFactory(user=user)
    m1 = MaterialFactory(knowledge_base=kb1)
    MaterialFactory(knowledge_base=kb2)
    p1 = KnowledgePointFactory(knowledge_base=kb1)
    p2 = KnowledgePointFactory(knowledge_base=kb2)
    r1 = StudyRecordFactory(knowledge_point=p1)
    StudyRecordFactory(knowledge_point=p2)
    others = others_objects(UserFactory())

    def ids(path: str, **params: str) -> list[str]:
        response = client.get(f"/learning/{path}", params)
        assert response.status_code == 200
        return [obj["id"] for obj in response.json()["results"]]

    assert ids("materials", knowledgeBaseId=kb1.id) == [m1.id]
    assert ids("knowledge-points", knowledgeBaseId=kb1.id) == [p1.id]
    assert ids("study-records", knowledgePointId=p1.id) == [r1.id]
    assert len(ids("materials")) == 2 and len(ids("knowledge-points")) == 2 and len(ids("study-records")) == 2
    # Filtering by another user's id shows nothing of theirs.
    assert ids("materials", knowledgeBaseId=others["knowledge-bases"].id) == []
    assert ids("study-records", knowledgePointId=others["knowledge-points"].id) == []
