"""Reads shared by views and services."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from ai_jobs.models import AiRuntimeJob, JobStatus

POLL_MAX = 50


def pending_jobs(*, job_types: Sequence[str], limit: int, now: dt.datetime) -> list[AiRuntimeJob]:
    """Due pending jobs of the given types in queue order (seed 000 §10), served by
    the partial index on pending rows."""
    return list(
        AiRuntimeJob.objects.filter(status=JobStatus.PENDING, available_at__lte=now, job_type__in=job_types).order_by(
            "priority", "created_at", "id"
        )[: min(limit, POLL_MAX)]
    )
