"""/learning/* end to end through DRF's client (contract §4): CRUD of the four
resources, object-level authorization, validation in the contract's error body,
cursor pagination and the list filters."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.selectors import public_id_of
from learning import selectors, services
from learning.models import KnowledgeBase, KnowledgePoint, LearningProfile, Material, StudyRecord
from tests.support.api import error_code
from tests.support.factories import UserFactory
from tests.support.learning_factories import (
    KnowledgeBaseFactory,
    KnowledgePointFactory,
    MaterialFactory,
    StudyRecordFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


@pytest.fixture
def other_user(db):
    return UserFactory()


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


# --- object-level authorization ------------------------------------------------------------------


def _others_objects(other_user) -> dict[str, Any]:
    record = StudyRecordFactory(knowledge_point__knowledge_base__user=other_user)
    kp = record.knowledge_point
    return {
        "knowledge-bases": kp.knowledge_base,
        "materials": MaterialFactory(knowledge_base=kp.knowledge_base),
        "knowledge-points": kp,
        "study-records": record,
    }


PATCHES = {
    "knowledge-bases": {"name": "hijacked"},
    "materials": {"title": "hijacked"},
    "knowledge-points": {"name": "hijacked"},
    "study-records": {"score": 1},
}


@pytest.mark.parametrize("resource", list(PATCHES))
def test_another_users_object_answers_404_like_a_missing_one_and_changes_nothing(client, other_user, resource):
    obj = _others_objects(other_user)[resource]
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
    others = _others_objects(other_user)
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
    others = _others_objects(other_user)
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
    others = _others_objects(UserFactory())

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


# --- what the job-creation flow and /ai/learning-profile call ----------------------------------------------


def test_target_exists_for_user_only_for_the_users_own_targets(user, other_user):
    kp = KnowledgePointFactory(knowledge_base__user=user)
    material = MaterialFactory(knowledge_base=kp.knowledge_base)
    others = _others_objects(other_user)

    def exists(target_type: str, target_id: str) -> bool:
        return selectors.target_exists_for_user(user=user, target_type=target_type, target_id=target_id)

    assert exists("user", "me") and exists("user", public_id_of(user))
    assert not exists("user", str(user.pk))  # the database's key names no one on the wire (contract §2)
    assert not exists("user", public_id_of(other_user))
    assert exists("knowledge_base", kp.knowledge_base_id)
    assert exists("knowledge_point", kp.id)
    assert exists("material", material.id)
    assert not exists("knowledge_base", others["knowledge-bases"].id)
    assert not exists("knowledge_point", others["knowledge-points"].id)
    assert not exists("material", others["materials"].id)
    assert not exists("knowledge_point", material.id)  # right id, wrong type
    assert not exists("material", "mat_missing")
    assert not exists("galaxy", kp.id)


def test_learning_profile_update_creates_then_changes_only_what_it_is_given(user):
    assert selectors.learning_profile_get(user=user) is None
    assert selectors.learning_profile_data(user=user)["goals"] == ""
    profile = services.learning_profile_update(user=user, goals="Pass the exam", level="beginner")
    assert (profile.goals, profile.level, profile.preferred_study_time) == ("Pass the exam", "beginner", "")
    services.learning_profile_update(user=user, preferred_study_time="evening", preferences={"pace": "slow"})
    data = selectors.learning_profile_data(user=user)
    assert data["goals"] == "Pass the exam" and data["preferredStudyTime"] == "evening"
    assert data["preferences"] == {"pace": "slow"} and data["updatedAt"]
    assert LearningProfile.objects.filter(user=user).count() == 1
