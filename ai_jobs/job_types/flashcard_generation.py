"""``flashcard_generation``: flashcards for a knowledge base, ``cardCount`` of them
(1 to 100, default 20), stored as candidates and published once per knowledge base."""

from __future__ import annotations

from typing import Any

from ai_jobs import outputs
from ai_jobs.job_types.common import KNOWLEDGE_BASE, published_notice
from ai_jobs.job_types.registry import CountParam, JobType
from ai_jobs.models import AiRuntimeJob, Flashcard, FlashcardCandidate
from ai_jobs.outputs.publishing import store_flashcards


def notice(job: AiRuntimeJob) -> tuple[str, dict[str, Any]]:
    return published_notice(job, candidates=FlashcardCandidate, noun="flashcard")


JOB_TYPE = JobType(
    name="flashcard_generation",
    label="Flashcards",
    target_types=KNOWLEDGE_BASE,
    count=CountParam(name="cardCount", low=1, high=100, default=20),
    store=store_flashcards,
    outputs=(FlashcardCandidate, Flashcard),
    lists=(outputs.FLASHCARDS,),
    notice=notice,
)
