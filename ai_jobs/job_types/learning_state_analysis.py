"""``learning_state_analysis``: how the learner stands on a target (one analysis)."""

from __future__ import annotations

from typing import Any

from ai_jobs import outputs
from ai_jobs.job_types.common import ANALYSIS_TARGETS
from ai_jobs.job_types.registry import JobType
from ai_jobs.models import AiLearningAnalysis, AiRuntimeJob
from ai_jobs.outputs.analyses import store_analysis
from ai_jobs.outputs.common import Stored


def notice(job: AiRuntimeJob, stored: Stored = None) -> tuple[str, dict[str, Any]]:
    if stored is not None and "analysisId" in stored:
        score, level, analysis_id = float(stored["masteryScore"]), stored["level"], stored["analysisId"]
    else:
        analysis = AiLearningAnalysis.objects.filter(job_id=job.id).only("id", "mastery_score", "level").first()
        if analysis is None:
            return "", {}
        score, level, analysis_id = analysis.mastery_score, analysis.level, analysis.id
    return f"Mastery {score:g}/100, level {level}.", {"analysisId": analysis_id}


JOB_TYPE = JobType(
    name="learning_state_analysis",
    label="Learning analysis",
    target_types=ANALYSIS_TARGETS,
    store=store_analysis,
    outputs=(AiLearningAnalysis,),
    lists=(outputs.ANALYSES,),
    notice=notice,
)
