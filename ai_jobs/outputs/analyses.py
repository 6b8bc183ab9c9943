"""How analyses, weak points and recommendations are stored (contract §5): one
analysis per job, one weak-point candidate or recommendation per entry of the
output, all of a kind in one ``bulk_create``.

Nothing the model wrote is trusted as a reference: a ``knowledgePointId`` that is
not one of the job's user's knowledge points is stored as null, and so is a
recommendation's ``targetType``/``targetId`` that does not name the user or one of
their objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Model

from accounts.selectors import ME
from ai_jobs.models import (
    AiLearningAnalysis,
    AiRuntimeJob,
    AiRuntimeResult,
    NextActionRecommendation,
    TargetType,
    WeakPointCandidate,
)
from ai_jobs.outputs.common import base_fields, ordered_ids, own_points, point
from learning.models import KnowledgeBase, KnowledgePoint, Material


def store_analysis(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> None:
    AiLearningAnalysis.objects.bulk_create(
        [
            AiLearningAnalysis(
                **base_fields(job, result),
                summary=output["summary"],
                mastery_score=output["masteryScore"],
                level=output["level"],
                strengths=output["strengths"],
                weaknesses=output["weaknesses"],
                confidence=output["confidence"],
            )
        ]
    )


def store_weak_points(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> None:
    entries = output["weakPoints"]
    own = own_points(job, (entry.get("knowledgePointId") for entry in entries))
    ids = ordered_ids("weak", len(entries))
    WeakPointCandidate.objects.bulk_create(
        WeakPointCandidate(
            **base_fields(job, result),
            id=ids[position],
            position=position,
            knowledge_point_id=point(entry, own),
            title=entry["title"],
            reason=entry["reason"],
            severity=entry["severity"],
            evidence=entry["evidence"],
            confidence=entry["confidence"],
        )
        for position, entry in enumerate(entries)
    )


_OWNED_TARGETS: dict[str, type[Model]] = {
    TargetType.MATERIAL: Material,
    TargetType.KNOWLEDGE_POINT: KnowledgePoint,
    TargetType.KNOWLEDGE_BASE: KnowledgeBase,
}


def _own_targets(job: AiRuntimeJob, entries: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
    """The ``(targetType, targetId)`` pairs of ``entries`` that name one of the
    user's objects: one query per target type named, not per entry."""
    wanted: dict[str, set[str]] = {}
    for entry in entries:
        target_type, target_id = entry.get("targetType"), entry.get("targetId")
        if target_type in _OWNED_TARGETS and target_id:
            wanted.setdefault(target_type, set()).add(target_id)
    return {
        (target_type, object_id)
        for target_type, object_ids in wanted.items()
        for object_id in _OWNED_TARGETS[target_type]
        ._default_manager.filter(user_id=job.user_id, id__in=object_ids)
        .values_list("id", flat=True)
    }


def _action_target(
    job: AiRuntimeJob, entry: dict[str, Any], own: set[tuple[str, str]]
) -> tuple[str | None, str | None]:
    target_type, target_id = entry.get("targetType"), entry.get("targetId")
    if target_type == TargetType.USER and target_id in (None, ME, job.user_public_id):
        return target_type, job.user_public_id
    if (target_type, target_id) in own:
        return target_type, target_id
    return None, None


def store_recommendations(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> None:
    entries = output["recommendations"]
    own = _own_targets(job, entries)
    ids = ordered_ids("rcm", len(entries))
    rows = []
    for position, entry in enumerate(entries):
        action_target_type, action_target_id = _action_target(job, entry, own)
        rows.append(
            NextActionRecommendation(
                **base_fields(job, result),
                id=ids[position],
                position=position,
                action_type=entry["actionType"],
                title=entry["title"],
                description=entry["description"],
                priority=entry["priority"],
                estimated_minutes=entry["estimatedMinutes"],
                action_target_type=action_target_type,
                action_target_id=action_target_id,
            )
        )
    NextActionRecommendation.objects.bulk_create(rows)
