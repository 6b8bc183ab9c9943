"""``next_action_planning``: what to do next (one recommendation per entry)."""

from __future__ import annotations

from typing import Any

from ai_jobs import outputs
from ai_jobs.job_types.common import ANALYSIS_TARGETS, plural
from ai_jobs.job_types.registry import JobType
from ai_jobs.models import AiRuntimeJob, NextActionRecommendation
from ai_jobs.outputs.analyses import store_recommendations


def notice(job: AiRuntimeJob) -> tuple[str, dict[str, Any]]:
    count = NextActionRecommendation.objects.filter(job_id=job.id).count()
    return f"{plural(count, 'recommendation')}.", {"recommendations": count}


JOB_TYPE = JobType(
    name="next_action_planning",
    label="Study plan",
    target_types=ANALYSIS_TARGETS,
    store=store_recommendations,
    outputs=(NextActionRecommendation,),
    lists=(outputs.RECOMMENDATIONS,),
    notice=notice,
)
