"""``weak_point_analysis``: where the learner struggles (one weak-point candidate per entry)."""

from __future__ import annotations

from typing import Any

from ai_jobs import outputs
from ai_jobs.job_types.common import ANALYSIS_TARGETS, plural
from ai_jobs.job_types.registry import JobType
from ai_jobs.models import AiRuntimeJob, WeakPointCandidate
from ai_jobs.outputs.analyses import store_weak_points


def notice(job: AiRuntimeJob) -> tuple[str, dict[str, Any]]:
    count = WeakPointCandidate.objects.filter(job_id=job.id).count()
    return f"{plural(count, 'weak point')} found.", {"weakPoints": count}


JOB_TYPE = JobType(
    name="weak_point_analysis",
    label="Weak-point analysis",
    target_types=ANALYSIS_TARGETS,
    store=store_weak_points,
    outputs=(WeakPointCandidate,),
    lists=(outputs.WEAK_POINTS,),
    notice=notice,
)
