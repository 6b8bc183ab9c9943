"""Snapshots of the learning domain (every field is in ``learning/SNAPSHOT.md``):
``document`` has the database assemble one as JSON text in one statement
(``learning.snapshots.sql``), which is what ``ai_jobs.snapshots`` stores and sends.

The builders, one per target type (``BUILDERS``), say the same document with the
ORM, a fixed number of queries each (``learning.snapshots.parts``): the readable
reference the statement is held to (``tests/test_snapshot_sql.py``)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models.functions import Left, Length
from django.utils import timezone

from accounts.selectors import names_user
from learning import selectors
from learning.models import KnowledgePoint, Material, StudyRecord
from learning.snapshots.parts import (
    DESCRIPTION_EXCERPT_CHARS,
    LEARNING_SNAPSHOT_VERSION,
    MASTERED_ACCURACY,
    MASTERED_MIN_ATTEMPTS,
    MATERIAL_CONTENT_CHARS,
    MATERIALS_EXCERPT_BUDGET,
    MAX_KNOWLEDGE_BASES,
    MAX_KNOWLEDGE_POINTS,
    MAX_MATERIALS,
    MAX_RECENT_ATTEMPTS,
    POINT_FIELDS,
    WEAK_ACCURACY,
    common,
    empty_lists,
    iso,
    knowledge_base_data,
    knowledge_bases_data,
    knowledge_points_data,
    learner_timezone,
    mastery_label,
    materials_data,
    point_data,
    recent_attempts,
    streaks,
    study_stats,
    with_mastery,
    zone_named,
)
from learning.snapshots.sql import snapshot_document

__all__ = [
    "BUILDERS",
    "DESCRIPTION_EXCERPT_CHARS",
    "LEARNING_SNAPSHOT_VERSION",
    "MASTERED_ACCURACY",
    "MASTERED_MIN_ATTEMPTS",
    "MATERIALS_EXCERPT_BUDGET",
    "MATERIAL_CONTENT_CHARS",
    "MAX_KNOWLEDGE_BASES",
    "MAX_KNOWLEDGE_POINTS",
    "MAX_MATERIALS",
    "MAX_RECENT_ATTEMPTS",
    "WEAK_ACCURACY",
    "build_knowledge_base",
    "build_knowledge_point",
    "build_material",
    "build_user",
    "document",
    "learner_timezone",
    "mastery_label",
    "streaks",
    "study_stats",
]


# --- the builders, by target type (BUILDERS) --------------------------------------------------------


def build_user(user: AbstractBaseUser, target_id: str) -> dict[str, Any]:
    data, _tz, _now = common(user)
    if not names_user(user, str(target_id)):
        return {
            **data,
            "targetFound": False,
            "stats": None,
            **empty_lists("knowledgeBases", "knowledgePoints"),
            "recentAttempts": [],
        }
    records = StudyRecord.objects.filter(user=user)
    return {
        **data,
        "targetFound": True,
        "stats": data["overall"],
        **knowledge_bases_data(user),
        **knowledge_points_data(KnowledgePoint.objects.filter(user=user)),
        "recentAttempts": recent_attempts(records),
    }


def build_knowledge_base(user: AbstractBaseUser, target_id: str) -> dict[str, Any]:
    data, tz, now = common(user)
    knowledge_base = knowledge_base_data(user, target_id)
    if knowledge_base is None:
        return {
            **data,
            "targetFound": False,
            "knowledgeBase": None,
            "stats": None,
            **empty_lists("knowledgePoints", "materials"),
            "recentAttempts": [],
        }
    records = StudyRecord.objects.filter(user=user, knowledge_point__knowledge_base_id=target_id)
    return {
        **data,
        "targetFound": True,
        "knowledgeBase": knowledge_base,
        "stats": study_stats(records, tz=tz, now=now),
        **knowledge_points_data(KnowledgePoint.objects.filter(user=user, knowledge_base_id=target_id)),
        **materials_data(Material.objects.filter(user=user, knowledge_base_id=target_id)),
        "recentAttempts": recent_attempts(records),
    }


def build_material(user: AbstractBaseUser, target_id: str) -> dict[str, Any]:
    data, tz, now = common(user)
    row = (
        Material.objects.filter(user=user, id=target_id)
        .annotate(excerpt=Left("content", MATERIAL_CONTENT_CHARS), content_length=Length("content"))
        .values("id", "knowledge_base_id", "title", "excerpt", "content_length", "created_at", "updated_at")
        .first()
    )
    if row is None:
        return {
            **data,
            "targetFound": False,
            "material": None,
            "knowledgeBase": None,
            "stats": None,
            **empty_lists("knowledgePoints"),
            "recentAttempts": [],
        }
    knowledge_base_id = row["knowledge_base_id"]
    records = StudyRecord.objects.filter(user=user, knowledge_point__knowledge_base_id=knowledge_base_id)
    return {
        **data,
        "targetFound": True,
        "material": {
            "id": row["id"],
            "knowledgeBaseId": knowledge_base_id,
            "title": row["title"],
            "content": row["excerpt"],
            "contentLength": row["content_length"],
            "contentTruncated": row["content_length"] > MATERIAL_CONTENT_CHARS,
            "createdAt": iso(row["created_at"]),
            "updatedAt": iso(row["updated_at"]),
        },
        "knowledgeBase": knowledge_base_data(user, knowledge_base_id),
        "stats": study_stats(records, tz=tz, now=now),
        **knowledge_points_data(KnowledgePoint.objects.filter(user=user, knowledge_base_id=knowledge_base_id)),
        "recentAttempts": recent_attempts(records),
    }


def build_knowledge_point(user: AbstractBaseUser, target_id: str) -> dict[str, Any]:
    data, tz, now = common(user)
    row = with_mastery(KnowledgePoint.objects.filter(user=user, id=target_id)).values(*POINT_FIELDS).first()
    if row is None:
        return {
            **data,
            "targetFound": False,
            "knowledgePoint": None,
            "knowledgeBase": None,
            "stats": None,
            **empty_lists("knowledgePoints", "materials"),
            "recentAttempts": [],
        }
    knowledge_base_id = row["knowledge_base_id"]
    records = StudyRecord.objects.filter(user=user, knowledge_point_id=target_id)
    return {
        **data,
        "targetFound": True,
        "knowledgePoint": point_data(row),
        "knowledgeBase": knowledge_base_data(user, knowledge_base_id),
        "stats": study_stats(records, tz=tz, now=now),
        # The other points of its knowledge base, for context (the target is among them).
        **knowledge_points_data(KnowledgePoint.objects.filter(user=user, knowledge_base_id=knowledge_base_id)),
        **materials_data(Material.objects.filter(user=user, knowledge_base_id=knowledge_base_id)),
        "recentAttempts": recent_attempts(records),
    }


BUILDERS = {
    selectors.TARGET_USER: build_user,
    selectors.TARGET_KNOWLEDGE_BASE: build_knowledge_base,
    selectors.TARGET_MATERIAL: build_material,
    selectors.TARGET_KNOWLEDGE_POINT: build_knowledge_point,
}


def document(
    user: AbstractBaseUser,
    target_type: str,
    target_id: str,
    *,
    learner: dict[str, Any],
    timezone_name: str | None = None,
) -> str:
    """The snapshot's ``data`` as JSON text, assembled by the database: ``learner`` and
    ``target`` first, then what the target type's builder would give (only those two
    for a target type without one). Two statements: the learner's timezone (none when
    the caller has just read it: ``timezone_name``), the document."""
    target = {"type": target_type, "id": target_id}
    if target_type not in BUILDERS:
        return json.dumps({"learner": learner, "target": target}, ensure_ascii=False, separators=(",", ":"))
    tz = learner_timezone(user) if timezone_name is None else zone_named(timezone_name)
    now = timezone.now()
    return snapshot_document(
        user_id=user.pk,
        target_type=target_type,
        target_id=str(target_id),
        found=target_type != selectors.TARGET_USER or names_user(user, str(target_id)),
        timezone_name=tz.key,
        today=now.astimezone(tz).date(),
        generated_at=iso(now),
        learner_json=json.dumps(learner, ensure_ascii=False),
        target_json=json.dumps(target, ensure_ascii=False),
    )
