"""The learning snapshot builders (learning/SNAPSHOT.md): mastery, accuracy and
streaks on hand-made data, owner scoping, and a bounded number of queries."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from accounts.selectors import public_id_of
from ai_jobs.snapshots import build_data, snapshot_create
from learning import snapshots
from learning.models import StudyRecord
from learning.snapshots import streaks, study_stats
from tests.factories import UserFactory
from tests.learning_factories import (
    KnowledgeBaseFactory,
    KnowledgePointFactory,
    LearningProfileFactory,
    MaterialFactory,
    StudyRecordFactory,
)

pytestmark = pytest.mark.django_db


def _day(days_ago: int, hour: int = 12) -> dt.datetime:
    today = timezone.now().astimezone(dt.UTC).date()
    day = today - dt.timedelta(days=days_ago)
    return dt.datetime(day.year, day.month, day.day, hour, tzinfo=dt.UTC)


@pytest.fixture
def learning(user):
    """Algebra: A (developing), B (weak), D (mastered); Geometry: C (never studied).
    Study days ago: 0, 1, 2 (current streak 3) and 10..14 (longest streak 5)."""
    algebra = KnowledgeBaseFactory(user=user, name="Algebra", created_at=_day(30))
    geometry = KnowledgeBaseFactory(user=user, name="Geometry", created_at=_day(29))
    a = KnowledgePointFactory(knowledge_base=algebra, name="A")
    b = KnowledgePointFactory(knowledge_base=algebra, name="B")
    d = KnowledgePointFactory(knowledge_base=algebra, name="D")
    c = KnowledgePointFactory(knowledge_base=geometry, name="C")
    for correct, score, days_ago in ((True, 100, 0), (True, 90, 1), (True, 80, 2), (False, 20, 10)):
        StudyRecordFactory(knowledge_point=a, is_correct=correct, score=score, studied_at=_day(days_ago))
    for score, days_ago in ((10, 11), (30, 12)):
        StudyRecordFactory(knowledge_point=b, is_correct=False, score=score, studied_at=_day(days_ago))
    for days_ago, hour in ((13, 12), (14, 9), (14, 15)):
        StudyRecordFactory(knowledge_point=d, is_correct=True, score=100, studied_at=_day(days_ago, hour))
    MaterialFactory(knowledge_base=algebra, title="Intro", content="Variables stand for numbers.")
    LearningProfileFactory(user=user, goals="Pass algebra", level="beginner", preferred_study_time="evening")
    # Someone else's data never shows.
    StudyRecordFactory.create_batch(3, knowledge_point__knowledge_base__name="Not mine", is_correct=False, score=0)
    return {"algebra": algebra, "geometry": geometry, "a": a, "b": b, "c": c, "d": d}


def _points(data: dict) -> dict[str, dict]:
    return {point["name"]: point for point in data["knowledgePoints"]}


# --- streaks ----------------------------------------------------------------------------------


def test_streaks_current_and_longest():
    today = dt.date(2026, 11, 30)

    def days(*ago: int) -> list[dt.date]:
        return sorted(today - dt.timedelta(days=n) for n in ago)

    assert streaks([], today) == (0, 0)
    assert streaks(days(0), today) == (1, 1)
    assert streaks(days(1, 2), today) == (2, 2)  # not yet studied today: still alive
    assert streaks(days(2, 3), today) == (0, 2)  # missed yesterday: broken
    assert streaks(days(0, 1, 2, 10, 11, 12, 13, 14), today) == (3, 5)
    assert streaks(days(0, 1, 2, 3, 4, 5, 9), today) == (6, 6)


def test_study_days_are_the_learners_local_dates(user):
    # 23:30 UTC on two consecutive days is 07:30 the next day in Shanghai: still two
    # days; but 23:30 and 00:30 UTC are one Shanghai day, two UTC days.
    point = KnowledgePointFactory(knowledge_base__user=user)
    StudyRecordFactory(knowledge_point=point, studied_at=_day(2, 23) + dt.timedelta(minutes=30))
    StudyRecordFactory(knowledge_point=point, studied_at=_day(1, 0) + dt.timedelta(minutes=30))
    records = StudyRecord.objects.filter(user=user)
    now = timezone.now()
    assert study_stats(records, tz=ZoneInfo("UTC"), now=now)["studyDays"] == 2
    shanghai = study_stats(records, tz=ZoneInfo("Asia/Shanghai"), now=now)
    assert shanghai["studyDays"] == 1 and shanghai["longestStreakDays"] == 1


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
    assert overall["lastStudiedAt"] == _day(0).isoformat().replace("+00:00", "Z")
    assert overall["firstStudiedAt"] == _day(14, 9).isoformat().replace("+00:00", "Z")

    points = _points(data)
    assert set(points) == {"A", "B", "C", "D"} and data["knowledgePointsTotal"] == 4
    assert data["knowledgePointsTruncated"] is False
    assert points["A"]["mastery"] == {
        "attemptCount": 4,
        "correctCount": 3,
        "accuracy": 0.75,
        "averageScore": 72.5,
        "totalStudySeconds": 240,
        "lastStudiedAt": _day(0).isoformat().replace("+00:00", "Z"),
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
            studied_at=_day(i % 40),
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
