"""What the snapshot document says (learning/SNAPSHOT.md), through the one entry point,
on hand-made data: mastery, accuracy, streaks, scopes, owner scoping and bounds. Run on
PostgreSQL (its statements) and on the embedded default (the ORM builders)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.utils import timezone

from accounts.selectors import public_id_of
from ai_jobs.snapshots import build_data, snapshot_create
from learning import snapshots
from learning.models import StudyRecord
from tests.support.factories import UserFactory
from tests.support.learning_factories import (
    KnowledgeBaseFactory,
    KnowledgePointFactory,
    MaterialFactory,
    StudyRecordFactory,
)
from tests.support.snapshots import day, hand_made_learning

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


@pytest.fixture
def learning(user):
    return hand_made_learning(user)


def test_the_document_is_postgresqls_statement_there_and_the_orm_builders_elsewhere(user, learning, monkeypatch):
    now = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: now)
    learner = {"userId": public_id_of(user)}
    way = snapshots.sql_document if connection.vendor == "postgresql" else snapshots.orm_document
    for target_type, target_id in (("user", "me"), ("knowledge_base", learning["algebra"].id)):
        text = snapshots.document(user, target_type, target_id, learner=learner)
        assert text == way(user, target_type, target_id, learner=learner, tz=ZoneInfo("UTC"), now=now)


def _points(data: dict) -> dict[str, dict]:
    return {point["name"]: point for point in data["knowledgePoints"]}


# --- the user target ------------------------------------------------------------------------------


def test_user_snapshot_numbers(user, learning):
    data = build_data(user=user, target_type="user", target_id=public_id_of(user))
    assert data["learner"] == {"userId": public_id_of(user)}  # pseudonymous: no username, no email
    assert data["target"] == {"type": "user", "id": public_id_of(user)}
    assert data["learningSnapshotVersion"] == "v2" and data["targetFound"] is True
    assert data["timezone"] == "UTC"
    assert data["profile"]["goals"] == "Pass algebra" and data["profile"]["preferredStudyTime"] == "evening"

    overall = data["overall"]
    assert overall == data["stats"]
    assert overall["attemptCount"] == 9 and overall["correctCount"] == 6
    assert overall["accuracy"] == pytest.approx(0.6667)
    assert overall["averageScore"] == 70.0
    assert overall["totalStudySeconds"] == 9 * 60
    assert overall["knowledgePointsStudied"] == 3
    assert overall["studyDays"] == 8
    assert overall["currentStreakDays"] == 3 and overall["longestStreakDays"] == 5
    assert overall["lastStudiedAt"] == day(0).isoformat().replace("+00:00", "Z")
    assert overall["firstStudiedAt"] == day(14, 9).isoformat().replace("+00:00", "Z")

    points = _points(data)
    assert set(points) == {"A", "B", "C", "D"} and data["knowledgePointsTotal"] == 4
    assert data["knowledgePointsTruncated"] is False
    assert points["A"]["mastery"] == {
        "attemptCount": 4,
        "correctCount": 3,
        "accuracy": 0.75,
        "averageScore": 72.5,
        "totalStudySeconds": 240,
        "lastStudiedAt": day(0).isoformat().replace("+00:00", "Z"),
        "level": "developing",
    }
    assert points["B"]["mastery"]["accuracy"] == 0.0 and points["B"]["mastery"]["level"] == "weak"
    assert points["B"]["mastery"]["averageScore"] == 20.0
    assert points["D"]["mastery"]["level"] == "mastered" and points["D"]["mastery"]["attemptCount"] == 3
    assert points["C"]["mastery"] == {
        "attemptCount": 0,
        "correctCount": 0,
        "accuracy": None,
        "averageScore": None,
        "totalStudySeconds": 0,
        "lastStudiedAt": None,
        "level": "not_started",
    }
    # Most recently studied first, never-studied last.
    assert [p["name"] for p in data["knowledgePoints"]] == ["A", "B", "D", "C"]

    bases = {kb["name"]: kb for kb in data["knowledgeBases"]}
    assert set(bases) == {"Algebra", "Geometry"}
    assert bases["Algebra"]["knowledgePointCount"] == 3 and bases["Algebra"]["materialCount"] == 1
    assert bases["Algebra"]["attemptCount"] == 9 and bases["Algebra"]["accuracy"] == pytest.approx(0.6667)
    assert bases["Geometry"]["attemptCount"] == 0 and bases["Geometry"]["accuracy"] is None

    attempts = data["recentAttempts"]
    assert len(attempts) == 9 and attempts[0]["knowledgePointName"] == "A" and attempts[0]["score"] == 100
    assert [a["studiedAt"] for a in attempts] == sorted((a["studiedAt"] for a in attempts), reverse=True)


def test_user_snapshot_of_a_learner_with_no_data(user):
    data = build_data(user=user, target_type="user", target_id=public_id_of(user))
    assert data["overall"]["attemptCount"] == 0 and data["overall"]["accuracy"] is None
    assert data["overall"]["currentStreakDays"] == 0 and data["overall"]["longestStreakDays"] == 0
    assert data["knowledgePoints"] == [] and data["recentAttempts"] == [] and data["knowledgeBases"] == []
    assert data["profile"] == {"goals": "", "level": "", "preferredStudyTime": "", "preferences": {}, "updatedAt": None}


# --- knowledge base, material, knowledge point ------------------------------------------------------


def test_knowledge_base_snapshot_has_its_points_materials_and_scoped_numbers(user, learning):
    algebra = learning["algebra"]
    MaterialFactory(knowledge_base=learning["geometry"], title="Not in algebra")
    data = build_data(user=user, target_type="knowledge_base", target_id=algebra.id)
    assert data["targetFound"] is True
    assert data["knowledgeBase"]["id"] == algebra.id and data["knowledgeBase"]["name"] == "Algebra"
    assert set(_points(data)) == {"A", "B", "D"}
    assert data["materials"] == [
        {
            "id": algebra.materials.get().id,
            "title": "Intro",
            "excerpt": "Variables stand for numbers.",
            "contentLength": 28,
            "excerptTruncated": False,
        }
    ]
    assert data["materialsTotal"] == 1 and data["materialsTruncated"] is False
    assert data["stats"]["attemptCount"] == 9 and data["stats"]["longestStreakDays"] == 5

    geometry = build_data(user=user, target_type="knowledge_base", target_id=learning["geometry"].id)
    assert geometry["stats"]["attemptCount"] == 0 and geometry["recentAttempts"] == []
    assert [m["title"] for m in geometry["materials"]] == ["Not in algebra"]
    # The overall numbers are the learner's, whatever the target.
    assert geometry["overall"]["attemptCount"] == 9


def test_knowledge_point_snapshot(user, learning):
    data = build_data(user=user, target_type="knowledge_point", target_id=learning["b"].id)
    assert data["targetFound"] is True
    assert data["knowledgePoint"]["name"] == "B" and data["knowledgePoint"]["mastery"]["level"] == "weak"
    assert data["knowledgeBase"]["name"] == "Algebra"
    assert data["stats"]["attemptCount"] == 2 and data["stats"]["accuracy"] == 0.0
    assert data["stats"]["currentStreakDays"] == 0 and data["stats"]["longestStreakDays"] == 2
    assert {a["knowledgePointId"] for a in data["recentAttempts"]} == {learning["b"].id}
    assert set(_points(data)) == {"A", "B", "D"}
    assert [m["title"] for m in data["materials"]] == ["Intro"]


def test_material_snapshot_carries_the_content_cut_to_a_bound(user, learning):
    long_text = "x" * (snapshots.MATERIAL_CONTENT_CHARS + 10)
    material = MaterialFactory(knowledge_base=learning["algebra"], title="Long", content=long_text)
    data = build_data(user=user, target_type="material", target_id=material.id)
    assert data["targetFound"] is True
    assert data["material"]["title"] == "Long" and data["material"]["knowledgeBaseId"] == learning["algebra"].id
    assert len(data["material"]["content"]) == snapshots.MATERIAL_CONTENT_CHARS
    assert data["material"]["contentLength"] == len(long_text) and data["material"]["contentTruncated"] is True
    assert data["knowledgeBase"]["name"] == "Algebra" and set(_points(data)) == {"A", "B", "D"}
    assert data["stats"]["attemptCount"] == 9


@pytest.mark.parametrize("target_type", ["knowledge_base", "material", "knowledge_point", "user"])
def test_another_users_or_a_missing_target_gives_no_data_of_it(user, target_type):
    other = UserFactory()
    record = StudyRecordFactory(knowledge_point__knowledge_base__user=other)
    material = MaterialFactory(knowledge_base=record.knowledge_point.knowledge_base)
    target_id = {
        "knowledge_base": record.knowledge_point.knowledge_base_id,
        "material": material.id,
        "knowledge_point": record.knowledge_point_id,
        "user": public_id_of(other),
    }[target_type]
    data = build_data(user=user, target_type=target_type, target_id=target_id)
    assert data["targetFound"] is False and data["stats"] is None
    assert data["recentAttempts"] == [] and data["knowledgePoints"] == []
    assert data["overall"]["attemptCount"] == 0
    assert record.knowledge_point.name not in str(data) and material.title not in str(data)


def test_a_stored_snapshot_is_json(user, learning):
    snapshot = snapshot_create(user=user, target_type="knowledge_base", target_id=learning["algebra"].id)
    snapshot.refresh_from_db()
    assert snapshot.payload["knowledgeBase"]["name"] == "Algebra"
    assert snapshot.payload["overall"]["longestStreakDays"] == 5


# --- bounds -----------------------------------------------------------------------------------------


def test_a_large_knowledge_base_is_built_in_a_bounded_number_of_queries(user, django_assert_max_num_queries):
    kb = KnowledgeBaseFactory(user=user)
    points = KnowledgePointFactory.create_batch(250, knowledge_base=kb)
    StudyRecord.objects.bulk_create(
        StudyRecord(
            user=user,
            knowledge_point=point,
            is_correct=i % 3 != 0,
            score=i % 101,
            duration_seconds=30,
            studied_at=day(i % 40),
        )
        for i, point in enumerate(points * 2)
    )
    for i in range(40):
        MaterialFactory(knowledge_base=kb, content="y" * 10_000, title=f"M{i}")

    with django_assert_max_num_queries(14):
        data = build_data(user=user, target_type="knowledge_base", target_id=kb.id)
    assert len(data["knowledgePoints"]) == snapshots.MAX_KNOWLEDGE_POINTS
    assert data["knowledgePointsTotal"] == 250 and data["knowledgePointsTruncated"] is True
    assert len(data["materials"]) == snapshots.MAX_MATERIALS
    assert data["materialsTotal"] == 40 and data["materialsTruncated"] is True
    assert sum(len(m["excerpt"]) for m in data["materials"]) <= snapshots.MATERIALS_EXCERPT_BUDGET
    assert len(data["recentAttempts"]) == snapshots.MAX_RECENT_ATTEMPTS
    assert data["stats"]["attemptCount"] == 500 and data["stats"]["knowledgePointsStudied"] == 250

    with django_assert_max_num_queries(14):
        build_data(user=user, target_type="user", target_id=public_id_of(user))
    with django_assert_max_num_queries(14):
        build_data(user=user, target_type="knowledge_point", target_id=points[0].id)


def test_the_user_snapshot_bounds_knowledge_bases(user, django_assert_max_num_queries):
    for _ in range(snapshots.MAX_KNOWLEDGE_BASES + 5):
        KnowledgePointFactory(knowledge_base__user=user)
    with django_assert_max_num_queries(14):
        data = build_data(user=user, target_type="user", target_id=public_id_of(user))
    assert len(data["knowledgeBases"]) == snapshots.MAX_KNOWLEDGE_BASES
    assert data["knowledgeBasesTotal"] == snapshots.MAX_KNOWLEDGE_BASES + 5 and data["knowledgeBasesTruncated"] is True
    assert all(kb["knowledgePointCount"] == 1 for kb in data["knowledgeBases"])
