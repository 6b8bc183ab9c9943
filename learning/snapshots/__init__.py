"""The snapshot document (learning/SNAPSHOT.md): what a runtime is told about a learner
and a target, as JSON text. ``document`` is the one entry point; the database decides
the way. PostgreSQL builds the whole document in one statement (``sql_document``, the
statements of ``learning.queries``); the embedded default (SQLite) builds it with the
ORM (``orm_document``, the builders of ``learning.snapshots.builders``). The two give
the same document: ``tests/test_snapshot_sql.py`` compares them on PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.utils import timezone

from accounts.selectors import names_user
from config.sql import fetch
from learning import queries, selectors
from learning.snapshots.builders import BUILDERS
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
    WEAK_ACCURACY,
    iso,
    learner_timezone,
    mastery_label,
    streaks,
    study_stats,
    zone_named,
)

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
    "document",
    "learner_timezone",
    "mastery_label",
    "orm_document",
    "sql_document",
    "streaks",
    "study_stats",
]


def document(
    user: AbstractBaseUser,
    target_type: str,
    target_id: str,
    *,
    learner: dict[str, Any],
    timezone_name: str | None = None,
) -> str:
    """The snapshot's ``data`` as JSON text: ``learner`` and ``target`` first, then what
    the target type's document holds (only those two for a target type without one).
    ``timezone_name``: the learner's zone when the caller has just read it (else read here)."""
    if target_type not in BUILDERS:
        target = {"type": target_type, "id": target_id}
        return json.dumps({"learner": learner, "target": target}, ensure_ascii=False, separators=(",", ":"))
    tz = learner_timezone(user) if timezone_name is None else zone_named(timezone_name)
    build = sql_document if connection.vendor == "postgresql" else orm_document
    return build(user, target_type, target_id, learner=learner, tz=tz, now=timezone.now())


def sql_document(
    user: AbstractBaseUser, target_type: str, target_id: str, *, learner: dict[str, Any], tz: ZoneInfo, now: dt.datetime
) -> str:
    """PostgreSQL's way: the database builds the document and sends it as text."""
    params = {
        "user_id": user.pk,
        "target_type": target_type,
        "target_id": str(target_id),
        "timezone": tz.key,
        "today": now.astimezone(tz).date(),
        "generated_at": iso(now),
        "learner": json.dumps(learner, ensure_ascii=False),
        "target": json.dumps({"type": target_type, "id": target_id}, ensure_ascii=False),
    }
    if target_type == selectors.TARGET_USER:
        [(text,)] = fetch(queries.SNAPSHOT_OF_USER, {**params, "found": names_user(user, str(target_id))})
    else:
        [(text,)] = fetch(queries.SNAPSHOT_IN_KNOWLEDGE_BASE, params)
    return text


def orm_document(
    user: AbstractBaseUser, target_type: str, target_id: str, *, learner: dict[str, Any], tz: ZoneInfo, now: dt.datetime
) -> str:
    """The embedded default's way: the target type's builder, the text written here."""
    data = {
        "learner": learner,
        "target": {"type": target_type, "id": target_id},
        **BUILDERS[target_type](user, str(target_id), tz=tz, now=now),
    }
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
