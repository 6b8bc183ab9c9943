"""One learner's data, the same on every database (fixed ids and times), and the
snapshot documents of every target type over it: what ``tests/test_snapshot_sql.py``
compares between the ORM reference, PostgreSQL and SQLite.

    python -c "import django; django.setup(); from tests.snapshot_support import main; main()"
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
from quotas.models import UserAiSettings

PUBLIC_ID = "usr_snapshotsqlsame"
ZONE = "Asia/Shanghai"  # UTC+8: an attempt at 20:00 UTC is on the next local day


def _at(days_ago: int, hour: int, microsecond: int = 0) -> dt.datetime:
    """A moment ``days_ago`` UTC days before today; with ``microsecond`` 0, isoformat has no fraction."""
    today = timezone.now().astimezone(dt.UTC).date()
    day = today - dt.timedelta(days=days_ago)
    return dt.datetime(day.year, day.month, day.day, hour, 0, 0, microsecond, tzinfo=dt.UTC)


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


def without_time(document: dict[str, Any]) -> dict[str, Any]:
    """The document less ``generatedAt`` (when it was built is all two builds may differ in)."""
    return {key: value for key, value in document.items() if key != "generatedAt"}


def documents(user: Any) -> dict[str, dict[str, Any]]:
    return {
        f"{target_type}:{target_id}": without_time(build_data(user=user, target_type=target_type, target_id=target_id))
        for target_type, target_id in TARGETS
    }


def main() -> None:
    call_command("migrate", verbosity=0)
    json.dump(documents(load()), sys.stdout)
