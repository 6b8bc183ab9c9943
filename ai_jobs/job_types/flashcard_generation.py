"""``flashcard_generation``: flashcards for a knowledge base, ``cardCount`` of them
(1 to 100, default 20), stored as candidates and published once per knowledge base."""

from ai_jobs import outputs
from ai_jobs.job_types.common import KNOWLEDGE_BASE, published
from ai_jobs.job_types.registry import CountParam, JobType
from ai_jobs.models import Flashcard, FlashcardCandidate
from ai_jobs.outputs.publishing import store_flashcards

JOB_TYPE = JobType(
    name="flashcard_generation",
    label="Flashcards",
    target_types=KNOWLEDGE_BASE,
    count=CountParam(name="cardCount", low=1, high=100, default=20),
    store=store_flashcards,
    outputs=(FlashcardCandidate, Flashcard),
    lists=(outputs.FLASHCARDS,),
    notice=published(FlashcardCandidate, "flashcard"),
)
