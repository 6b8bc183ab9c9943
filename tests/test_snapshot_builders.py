"""The ORM builders of the snapshot document (``learning.snapshots.builders`` and
``parts``), the embedded default's way to it: streaks, the learner's local study days,
and a bounded number of queries whatever the size of the learner's data."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from accounts.selectors import public_id_of
from learning import snapshots
from learning.models import StudyRecord
from learning.snapshots import BUILDERS, streaks, study_stats
from tests.support.learning_factories import (
    KnowledgeBaseFactory,
    KnowledgePointFactory,
    MaterialFactory,
    StudyRecordFactory,
)
from tests.support.snapshots import day

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

UTC = ZoneInfo("UTC")


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
    StudyRecordFactory(knowledge_point=point, studied_at=day(2, 23) + dt.timedelta(minutes=30))
    StudyRecordFactory(knowledge_point=point, studied_at=day(1, 0) + dt.timedelta(minutes=30))
    records = StudyRecord.objects.filter(user=user)
    now = timezone.now()
    assert study_stats(records, tz=UTC, now=now)["studyDays"] == 2
    shanghai = study_stats(records, tz=ZoneInfo("Asia/Shanghai"), now=now)
    assert shanghai["studyDays"] == 1 and shanghai["longestStreakDays"] == 1


@pytest.fixture
def large(user):
    """More knowledge bases, points, attempts and materials than a document lists."""
    kb = KnowledgeBaseFactory(user=user)
    for _ in range(snapshots.MAX_KNOWLEDGE_BASES + 2):
        KnowledgeBaseFactory(user=user)
    points = KnowledgePointFactory.create_batch(snapshots.MAX_KNOWLEDGE_POINTS + 10, knowledge_base=kb)
    StudyRecord.objects.bulk_create(
        StudyRecord(user=user, knowledge_point=point, is_correct=i % 3 != 0, score=i % 101, studied_at=day(i % 40))
        for i, point in enumerate(points * 2)
    )
    for i in range(snapshots.MAX_MATERIALS + 5):
        MaterialFactory(knowledge_base=kb, content="y" * 10_000, title=f"M{i}")
    return {
        "user": kb.id,
        "knowledge_base": kb.id,
        "material": kb.materials.first().id,
        "knowledge_point": points[0].id,
    }


@pytest.mark.parametrize("target_type", list(BUILDERS))
def test_each_builder_runs_a_bounded_number_of_queries_whatever_the_data(
    user, large, target_type, django_assert_max_num_queries
):
    target_id = public_id_of(user) if target_type == "user" else large[target_type]
    with django_assert_max_num_queries(12):
        data = BUILDERS[target_type](user, target_id, tz=UTC, now=timezone.now())
    assert data["targetFound"] is True
    assert len(data["knowledgePoints"]) == snapshots.MAX_KNOWLEDGE_POINTS and data["knowledgePointsTruncated"] is True
    assert len(data["recentAttempts"]) == min(snapshots.MAX_RECENT_ATTEMPTS, data["stats"]["attemptCount"])
    if "materials" in data:
        assert len(data["materials"]) == snapshots.MAX_MATERIALS and data["materialsTruncated"] is True
        assert sum(len(m["excerpt"]) for m in data["materials"]) <= snapshots.MATERIALS_EXCERPT_BUDGET
    if "knowledgeBases" in data:
        assert len(data["knowledgeBases"]) == snapshots.MAX_KNOWLEDGE_BASES and data["knowledgeBasesTruncated"] is True


@pytest.mark.parametrize("target_type", list(BUILDERS))
def test_a_builder_of_a_missing_target_gives_empty_lists_and_no_stats(user, target_type):
    data = BUILDERS[target_type](user, "missing", tz=UTC, now=timezone.now())
    assert data["targetFound"] is False and data["stats"] is None and data["recentAttempts"] == []
    assert all(data[key] == [] for key in data if f"{key}Total" in data)
    assert data["overall"]["attemptCount"] == 0
