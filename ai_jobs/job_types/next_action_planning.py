"""``next_action_planning``: what to do next (one recommendation per entry)."""

from ai_jobs import outputs
from ai_jobs.job_types.common import ANALYSIS_TARGETS, counted
from ai_jobs.job_types.registry import JobType
from ai_jobs.models import NextActionRecommendation
from ai_jobs.outputs.analyses import store_recommendations

JOB_TYPE = JobType(
    name="next_action_planning",
    label="Study plan",
    target_types=ANALYSIS_TARGETS,
    store=store_recommendations,
    outputs=(NextActionRecommendation,),
    lists=(outputs.RECOMMENDATIONS,),
    notice=counted(NextActionRecommendation, "recommendation", "{}.", "recommendations"),
)
