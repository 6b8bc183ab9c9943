"""The snapshot document built with the ORM, one builder per target type
(``BUILDERS``): the embedded default's (SQLite) way to the document PostgreSQL builds
in one statement (``learning.queries``), and the reference that statement is held to.
Each builder runs a fixed number of queries whatever the size of the learner's data
(``learning.snapshots.parts``). A builder gives the document after ``learner`` and
``target``, for the learner's zone ``tz`` at ``now``."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib.auth.models import AbstractBaseUser
from django.db.models.functions import Left, Length

from accounts.selectors import names_user
from learning import selectors
from learning.models import KnowledgePoint, Material, StudyRecord
from learning.snapshots.parts import (
    MATERIAL_CONTENT_CHARS,
    POINT_FIELDS,
    common,
    empty_lists,
    iso,
    knowledge_base_data,
    knowledge_bases_data,
    knowledge_points_data,
    materials_data,
    point_data,
    recent_attempts,
    study_stats,
    with_mastery,
)


def build_user(user: AbstractBaseUser, target_id: str, *, tz: ZoneInfo, now: dt.datetime) -> dict[str, Any]:
    data = common(user, tz=tz, now=now)
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


def build_knowledge_base(user: AbstractBaseUser, target_id: str, *, tz: ZoneInfo, now: dt.datetime) -> dict[str, Any]:
    data = common(user, tz=tz, now=now)
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


def build_material(user: AbstractBaseUser, target_id: str, *, tz: ZoneInfo, now: dt.datetime) -> dict[str, Any]:
    data = common(user, tz=tz, now=now)
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


def build_knowledge_point(user: AbstractBaseUser, target_id: str, *, tz: ZoneInfo, now: dt.datetime) -> dict[str, Any]:
    data = common(user, tz=tz, now=now)
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
