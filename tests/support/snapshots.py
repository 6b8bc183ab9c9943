"""Learners' data for the snapshot tests. ``load`` and ``load_past_every_bound``: the
same on every database (fixed ids and times), with the targets of every type over them
(``TARGETS``, ``TARGETS_PAST_EVERY_BOUND``): what ``tests/test_snapshot_sql.py``
compares between PostgreSQL's statements, the ORM builders and SQLite. ``hand_made_learning``:
hand-made data whose figures the document tests know.

    python -c "import django; django.setup(); from tests.support.snapshots import main; main()"
    (with DATABASE_URL: migrate, load, print the documents as JSON)
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from accounts.models import Account
from ai_jobs.snapshots import build_data
from learning.models import KnowledgeBase, KnowledgePoint, LearningProfile, Material, StudyRecord
from learning.snapshots import (
    MATERIAL_CONTENT_CHARS,
    MAX_KNOWLEDGE_BASES,
    MAX_KNOWLEDGE_POINTS,
    MAX_MATERIALS,
    MAX_RECENT_ATTEMPTS,
)
from quotas.models import UserAiSettings
from tests.support.learning_factories import (
    KnowledgeBaseFactory,
    KnowledgePointFactory,
    LearningProfileFactory,
    MaterialFactory,
    StudyRecordFactory,
)

PUBLIC_ID = "usr_snapshotsqlsame"
ZONE = "Asia/Shanghai"  # UTC+8: an attempt at 20:00 UTC is on the next local day


def _at(days_ago: int, hour: int, microsecond: int = 0) -> dt.datetime:
    """A moment ``days_ago`` UTC days before today; with ``microsecond`` 0, isoformat has no fraction."""
    today = timezone.now().astimezone(dt.UTC).date()
    date = today - dt.timedelta(days=days_ago)
    return dt.datetime(date.year, date.month, date.day, hour, 0, 0, microsecond, tzinfo=dt.UTC)


def load() -> Any:
    """The learner: two bases (one with long texts past every cut), points studied,
    weak, mastered and never studied, attempts near midnight in their zone, a profile."""
    user = get_user_model().objects.create_user("snapshot-sql-learner")
    Account.objects.filter(user=user).update(public_id=PUBLIC_ID)
    user = get_user_model().objects.select_related("account").get(pk=user.pk)
    UserAiSettings.objects.update_or_create(user=user, defaults={"timezone": ZONE, "ai_analysis_enabled": True})
    algebra = KnowledgeBase.objects.create(
        id="kb_algebra", user=user, name="Algebra", description="Équations " * 80, created_at=_at(30, 8)
    )
    geometry = KnowledgeBase.objects.create(
        id="kb_geometry", user=user, name="Geometry", description="Shapes", created_at=_at(29, 8, 250)
    )
    points = {
        name: KnowledgePoint.objects.create(
            id=f"kp_{name}", user=user, knowledge_base=base, name=f"Point {name}", description=text,
            created_at=_at(28, hour),
        )
        for name, base, text, hour in (
            ("a", algebra, "Linear equations", 1), ("b", algebra, "x" * 600, 2), ("d", algebra, "Mastered", 3),
            ("c", geometry, "Never studied", 4),
        )
    }  # fmt: skip
    attempts = [  # point, correct, score, days ago, hour (UTC), microsecond
        ("a", True, 100, 0, 1, 0), ("a", True, 90.5, 1, 20, 123456), ("a", False, 33.25, 2, 12, 0),
        ("a", False, 20, 10, 12, 7), ("b", False, 10, 11, 23, 0), ("b", True, 30, 12, 3, 0),
        ("d", True, 100, 13, 12, 0), ("d", True, 95, 14, 9, 0), ("d", True, 99, 14, 15, 500000),
    ]  # fmt: skip
    for index, (point, correct, score, days_ago, hour, micro) in enumerate(attempts):
        StudyRecord.objects.create(
            id=f"rec_{index:02d}", user=user, knowledge_point=points[point], is_correct=correct, score=score,
            duration_seconds=60 + index, studied_at=_at(days_ago, hour, micro),
        )  # fmt: skip
    for index in range(3):
        Material.objects.create(
            id=f"mat_{index}", user=user, knowledge_base=algebra, title=f"Chapter {index}",
            content=("Text " * 3000) if index == 0 else "Short", created_at=_at(20 - index, 6),
        )  # fmt: skip
    Material.objects.filter(user=user).update(updated_at=_at(5, 6, 42))
    LearningProfile.objects.create(user=user, goals="Pass algebra", level="beginner", preferences={"pace": "slow"})
    LearningProfile.objects.filter(user=user).update(updated_at=_at(3, 7, 0))
    return user


TARGETS = [
    ("user", "me"),
    ("user", PUBLIC_ID),
    ("user", "usr_someone_else"),
    ("knowledge_base", "kb_algebra"),
    ("knowledge_base", "kb_geometry"),
    ("knowledge_base", "kb_missing"),
    ("material", "mat_0"),
    ("material", "mat_missing"),
    ("knowledge_point", "kp_a"),
    ("knowledge_point", "kp_c"),
    ("knowledge_point", "kp_missing"),
]


PAST_PUBLIC_ID = "usr_snapshotpastbounds"


def load_past_every_bound() -> Any:
    """A learner with more of everything than a document lists: knowledge bases, points in
    one base, attempts, materials (and one longer than a material's content may be),
    scores with no short decimal form, attempts on consecutive local days."""
    user = get_user_model().objects.create_user("snapshot-sql-past-bounds")
    Account.objects.filter(user=user).update(public_id=PAST_PUBLIC_ID)
    user = get_user_model().objects.select_related("account").get(pk=user.pk)
    KnowledgeBase.objects.bulk_create(
        KnowledgeBase(id=f"kb_past{i:03d}", user=user, name=f"Base {i}", description="d" * (400 + 10 * i),
                      created_at=_at(60, 0, i))
        for i in range(MAX_KNOWLEDGE_BASES + 3)
    )  # fmt: skip
    KnowledgePoint.objects.bulk_create(
        KnowledgePoint(id=f"kp_past{i:03d}", user=user, knowledge_base_id="kb_past000", name=f"Point {i}",
                       description="p" * (i * 3), created_at=_at(50, 0, i))
        for i in range(MAX_KNOWLEDGE_POINTS + 5)
    )  # fmt: skip
    StudyRecord.objects.bulk_create(
        StudyRecord(id=f"rec_past{i:03d}", user=user, knowledge_point_id=f"kp_past{i % 40:03d}", is_correct=i % 3 != 0,
                    score=(i * 7.3) % 100, duration_seconds=i, studied_at=_at(i // 4, (i * 5) % 24, i))
        for i in range(MAX_RECENT_ATTEMPTS * 2 + 7)
    )  # fmt: skip
    Material.objects.bulk_create(
        Material(id=f"mat_past{i:03d}", user=user, knowledge_base_id="kb_past000", title=f"Material {i}",
                 content="m" * (MATERIAL_CONTENT_CHARS + 1 if i == 0 else 700 * i), created_at=_at(40, 0, i))
        for i in range(MAX_MATERIALS + 4)
    )  # fmt: skip
    Material.objects.filter(user=user).update(updated_at=_at(40, 1, 7))  # not now, as bulk_create would have it
    return user


TARGETS_PAST_EVERY_BOUND = [
    ("user", "me"),
    ("knowledge_base", "kb_past000"),
    ("material", "mat_past000"),
    ("material", "mat_past033"),
    ("knowledge_point", "kp_past003"),
    ("knowledge_point", "kp_past204"),
]


def day(days_ago: int, hour: int = 12) -> dt.datetime:
    """Noon (or ``hour``) UTC ``days_ago`` days before today."""
    return _at(days_ago, hour)


def hand_made_learning(user: Any) -> dict[str, Any]:
    """Algebra: A (developing), B (weak), D (mastered); Geometry: C (never studied).
    Study days ago: 0, 1, 2 (current streak 3) and 10..14 (longest streak 5); a
    profile; three attempts of someone else's, which never show."""
    algebra = KnowledgeBaseFactory(user=user, name="Algebra", created_at=day(30))
    geometry = KnowledgeBaseFactory(user=user, name="Geometry", created_at=day(29))
    a = KnowledgePointFactory(knowledge_base=algebra, name="A")
    b = KnowledgePointFactory(knowledge_base=algebra, name="B")
    d = KnowledgePointFactory(knowledge_base=algebra, name="D")
    c = KnowledgePointFactory(knowledge_base=geometry, name="C")
    for correct, score, days_ago in ((True, 100, 0), (True, 90, 1), (True, 80, 2), (False, 20, 10)):
        StudyRecordFactory(knowledge_point=a, is_correct=correct, score=score, studied_at=day(days_ago))
    for score, days_ago in ((10, 11), (30, 12)):
        StudyRecordFactory(knowledge_point=b, is_correct=False, score=score, studied_at=day(days_ago))
    for days_ago, hour in ((13, 12), (14, 9), (14, 15)):
        StudyRecordFactory(knowledge_point=d, is_correct=True, score=100, studied_at=day(days_ago, hour))
    MaterialFactory(knowledge_base=algebra, title="Intro", content="Variables stand for numbers.")
    LearningProfileFactory(user=user, goals="Pass algebra", level="beginner", preferred_study_time="evening")
    StudyRecordFactory.create_batch(3, knowledge_point__knowledge_base__name="Not mine", is_correct=False, score=0)
    return {"algebra": algebra, "geometry": geometry, "a": a, "b": b, "c": c, "d": d}


def without_time(document: dict[str, Any]) -> dict[str, Any]:
    """The document less ``generatedAt`` (when it was built is all two builds may differ in)."""
    return {key: value for key, value in document.items() if key != "generatedAt"}


def documents(user: Any, targets: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    return {
        f"{target_type}:{target_id}": without_time(build_data(user=user, target_type=target_type, target_id=target_id))
        for target_type, target_id in targets
    }


def main() -> None:
    call_command("migrate", verbosity=0)
    both = {"load": documents(load(), TARGETS), "past": documents(load_past_every_bound(), TARGETS_PAST_EVERY_BOUND)}
    json.dump(both, sys.stdout)
