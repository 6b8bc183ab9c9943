"""``weak_point_analysis``: where the learner struggles (one weak-point candidate per entry)."""

from ai_jobs import outputs
from ai_jobs.job_types.common import ANALYSIS_TARGETS, counted
from ai_jobs.job_types.registry import JobType
from ai_jobs.models import WeakPointCandidate
from ai_jobs.outputs.analyses import store_weak_points

JOB_TYPE = JobType(
    name="weak_point_analysis",
    label="Weak-point analysis",
    target_types=ANALYSIS_TARGETS,
    store=store_weak_points,
    outputs=(WeakPointCandidate,),
    lists=(outputs.WEAK_POINTS,),
    notice=counted(WeakPointCandidate, "weak point", "{} found.", "weakPoints"),
)
