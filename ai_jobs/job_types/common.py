"""What several job types' declarations share: their targets and their notices."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Model

from ai_jobs.job_types.registry import Notice
from ai_jobs.models import AiRuntimeJob, CandidateStatus, FlashcardCandidate, QuizQuestionCandidate, TargetType
from ai_jobs.outputs.common import Stored

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


def counted(model: type[Model], noun: str, sentence: str, key: str) -> Notice:
    """A notice that counts the job's rows of ``model``: ``counted(WeakPointCandidate,
    "weak point", "{} found.", "weakPoints")`` says "3 weak points found." with
    ``{"weakPoints": 3}``; the count is the store's ``stored[key]`` when it gave one."""

    def notice(job: AiRuntimeJob, stored: Stored = None) -> tuple[str, dict[str, Any]]:
        if stored is not None and key in stored:
            count = int(stored[key])
        else:
            count = model._default_manager.filter(job_id=job.id).count()
        return sentence.format(plural(count, noun)), {key: count}

    return notice


def published(candidates: type[QuizQuestionCandidate] | type[FlashcardCandidate], noun: str) -> Notice:
    """A notice of what a generation published: "2 new questions published, 1
    duplicate skipped." with the two counts (the store's, when it gave them)."""

    def notice(job: AiRuntimeJob, stored: Stored = None) -> tuple[str, dict[str, Any]]:
        if stored is not None and "published" in stored and "duplicates" in stored:
            data = {"published": int(stored["published"]), "duplicates": int(stored["duplicates"])}
        else:
            counts = dict(candidates.objects.filter(job_id=job.id).values_list("status").annotate(n=Count("id")))
            data = {
                "published": counts.get(CandidateStatus.PUBLISHED, 0),
                "duplicates": counts.get(CandidateStatus.DUPLICATE, 0),
            }
        message = f"{plural(data['published'], 'new ' + noun)} published"
        if data["duplicates"]:
            message += f", {plural(data['duplicates'], 'duplicate')} skipped"
        return message + ".", data

    return notice
