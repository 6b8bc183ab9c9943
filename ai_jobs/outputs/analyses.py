"""How analyses, weak points and recommendations are stored: one
analysis per job, one weak-point candidate or recommendation per entry of the
output, all of a kind in one multi-row ``INSERT`` (``config.sql.insert_rows``: a
fixed statement, not an ORM query compiled per result). Each store returns what
the job type's notice says (``Stored``), so the notice reads nothing back.

Nothing the model wrote is trusted as a reference: a ``knowledgePointId`` that is
not one of the job's user's knowledge points is stored as null, and so is a
recommendation's ``targetType``/``targetId`` that does not name the user or one of
their objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Model

from accounts.selectors import ME
from ai_jobs import queries
from ai_jobs.models import (
    AiLearningAnalysis,
    AiRuntimeJob,
    AiRuntimeResult,
    NextActionRecommendation,
    TargetType,
    WeakPointCandidate,
)
from ai_jobs.outputs.common import Stored, base_fields, ordered_ids, own_points, point
from config.ids import new_id
from config.sql import fetch, insert_rows
from learning.models import KnowledgeBase, KnowledgePoint, Material


def store_analysis(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> Stored:
    analysis_id = new_id("ana")
    insert_rows(
        AiLearningAnalysis,
        [
            {
                **base_fields(job, result),
                "id": analysis_id,
                "summary": output["summary"],
                "mastery_score": output["masteryScore"],
                "level": output["level"],
                "strengths": output["strengths"],
                "weaknesses": output["weaknesses"],
                "confidence": output["confidence"],
            }
        ],
    )
    return {"analysisId": analysis_id, "masteryScore": output["masteryScore"], "level": output["level"]}


def store_weak_points(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> Stored:
    entries = output["weakPoints"]
    own = own_points(job, (entry.get("knowledgePointId") for entry in entries))
    ids = ordered_ids("weak", len(entries))
    base = base_fields(job, result)
    insert_rows(
        WeakPointCandidate,
        [
            {
                **base,
                "id": ids[position],
                "position": position,
                "knowledge_point_id": point(entry, own),
                "title": entry["title"],
                "reason": entry["reason"],
                "severity": entry["severity"],
                "evidence": entry["evidence"],
                "confidence": entry["confidence"],
            }
            for position, entry in enumerate(entries)
        ],
    )
    return {"weakPoints": len(entries)}


_OWNED_TARGETS: dict[str, type[Model]] = {
    TargetType.MATERIAL: Material,
    TargetType.KNOWLEDGE_POINT: KnowledgePoint,
    TargetType.KNOWLEDGE_BASE: KnowledgeBase,
}


def _own_targets(job: AiRuntimeJob, entries: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
    """The ``(targetType, targetId)`` pairs of ``entries`` that name one of the
    user's objects: one statement for all the target types named (a ``UNION ALL``),
    none when no entry names one of the user's kinds of object."""
    wanted: dict[str, set[str]] = {}
    for entry in entries:
        target_type, target_id = entry.get("targetType"), entry.get("targetId")
        if target_type in _OWNED_TARGETS and target_id:
            wanted.setdefault(target_type, set()).add(target_id)
    if not wanted:
        return set()
    if connection.vendor != "postgresql":  # no arrays: the ORM, a query per type named
        return {
            (target_type, str(object_id))
            for target_type, object_ids in wanted.items()
            for object_id in _OWNED_TARGETS[target_type]
            .objects.filter(user_id=job.user_id, id__in=object_ids)
            .values_list("id", flat=True)
        }
    params = {
        "user_id": job.user_id,
        "material_ids": sorted(wanted.get(TargetType.MATERIAL, ())),
        "knowledge_point_ids": sorted(wanted.get(TargetType.KNOWLEDGE_POINT, ())),
        "knowledge_base_ids": sorted(wanted.get(TargetType.KNOWLEDGE_BASE, ())),
    }
    return {(str(kind), str(object_id)) for kind, object_id in fetch(queries.OWN_TARGETS, params)}


def _action_target(
    job: AiRuntimeJob, entry: dict[str, Any], own: set[tuple[str, str]]
) -> tuple[str | None, str | None]:
    target_type, target_id = entry.get("targetType"), entry.get("targetId")
    if target_type == TargetType.USER and target_id in (None, ME, job.user_public_id):
        return target_type, job.user_public_id
    if (target_type, target_id) in own:
        return target_type, target_id
    return None, None


def store_recommendations(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> Stored:
    entries = output["recommendations"]
    own = _own_targets(job, entries)
    ids = ordered_ids("rcm", len(entries))
    base = base_fields(job, result)
    rows = []
    for position, entry in enumerate(entries):
        action_target_type, action_target_id = _action_target(job, entry, own)
        rows.append(
            {
                **base,
                "id": ids[position],
                "position": position,
                "action_type": entry["actionType"],
                "title": entry["title"],
                "description": entry["description"],
                "priority": entry["priority"],
                "estimated_minutes": entry["estimatedMinutes"],
                "action_target_type": action_target_type,
                "action_target_id": action_target_id,
            }
        )
    insert_rows(NextActionRecommendation, rows)
    return {"recommendations": len(entries)}
