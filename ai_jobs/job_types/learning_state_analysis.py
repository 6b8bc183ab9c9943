"""``learning_state_analysis``: how the learner stands on a target (one analysis)."""

from __future__ import annotations

from typing import Any

from ai_jobs import outputs
from ai_jobs.job_types.common import ANALYSIS_TARGETS
from ai_jobs.job_types.registry import JobType
from ai_jobs.models import AiLearningAnalysis, AiRuntimeJob
from ai_jobs.outputs.analyses import store_analysis


def notice(job: AiRuntimeJob) -> tuple[str, dict[str, Any]]:
    analysis = AiLearningAnalysis.objects.filter(job_id=job.id).only("id", "mastery_score", "level").first()
    if analysis is None:
        return "", {}
    return f"Mastery {analysis.mastery_score:g}/100, level {analysis.level}.", {"analysisId": analysis.id}


JOB_TYPE = JobType(
    name="learning_state_analysis",
    label="Learning analysis",
    target_types=ANALYSIS_TARGETS,
    store=store_analysis,
    outputs=(AiLearningAnalysis,),
    lists=(outputs.ANALYSES,),
    notice=notice,
)
