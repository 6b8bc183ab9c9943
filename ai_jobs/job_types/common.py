"""What several job types' declarations share: their targets and their notices' wording."""

from __future__ import annotations

from typing import Any

from django.db.models import Count

from ai_jobs.models import AiRuntimeJob, CandidateStatus, FlashcardCandidate, QuizQuestionCandidate, TargetType

# An analysis looks at the user, one of their materials, knowledge points or knowledge bases.
ANALYSIS_TARGETS = frozenset(
    {
        TargetType.USER.value,
        TargetType.MATERIAL.value,
        TargetType.KNOWLEDGE_POINT.value,
        TargetType.KNOWLEDGE_BASE.value,
    }
)
# A generation publishes into a knowledge base.
KNOWLEDGE_BASE = frozenset({TargetType.KNOWLEDGE_BASE.value})


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def published_notice(
    job: AiRuntimeJob, *, candidates: type[QuizQuestionCandidate] | type[FlashcardCandidate], noun: str
) -> tuple[str, dict[str, Any]]:
    """``"2 new questions published, 1 duplicate skipped."``, with the two counts."""
    counts = dict(candidates.objects.filter(job_id=job.id).values_list("status").annotate(n=Count("id")))
    data = {
        "published": counts.get(CandidateStatus.PUBLISHED, 0),
        "duplicates": counts.get(CandidateStatus.DUPLICATE, 0),
    }
    message = f"{plural(data['published'], 'new ' + noun)} published"
    if data["duplicates"]:
        message += f", {plural(data['duplicates'], 'duplicate')} skipped"
    return message + ".", data
