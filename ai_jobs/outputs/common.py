"""What every kind of output is stored with: fresh ids in output order, the
job's user, job and target, and the knowledge points the model named that really
are the user's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection

from ai_jobs import queries
from ai_jobs.models import AiRuntimeJob, AiRuntimeResult
from config.ids import new_id
from config.sql import fetch
from learning.models import KnowledgePoint

# What a store function learned while storing (counts, the id of what it wrote): the
# job type's notice says it without reading the rows back. None: the notice reads.
Stored = dict[str, Any] | None


def ordered_ids(prefix: str, count: int) -> list[str]:
    """``count`` fresh ids, the largest first: the rows of one result share their
    ``created_at``, and the lists' ``-created_at, -id`` order then shows them in the
    order of the output."""
    return sorted((new_id(prefix) for _ in range(count)), reverse=True)


def base_fields(job: AiRuntimeJob, result: AiRuntimeResult) -> dict[str, Any]:
    return {
        "user_id": job.user_id,
        "job_id": job.id,
        "target_type": job.target_type,
        "target_id": job.target_id,
        "created_at": result.created_at,
    }


def own_points(job: AiRuntimeJob, ids: Iterable[str | None]) -> set[str]:
    """Which of ``ids`` are the job's user's knowledge points (one query, or none)."""
    wanted = {point_id for point_id in ids if point_id}
    if not wanted:
        return set()
    if connection.vendor != "postgresql":  # no arrays: the ORM
        return set(KnowledgePoint.objects.filter(user_id=job.user_id, id__in=wanted).values_list("id", flat=True))
    return {str(row[0]) for row in fetch(queries.OWN_POINTS, {"user_id": job.user_id, "ids": sorted(wanted)})}


def point(entry: dict[str, Any], own: set[str]) -> str | None:
    point_id = entry.get("knowledgePointId")
    return point_id if point_id in own else None
