"""What a job's result becomes: its outputs.

A job type's declaration (``ai_jobs.job_types``) names how its output is stored (a
store function of ``analyses`` or ``publishing``, run inside the result's
transaction: a result that is rolled back leaves no output) and the lists the user
reads them from (``OutputList`` below: ``GET /ai/<path>``, read with
``ai_jobs.selectors.job_linked``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Model

from ai_jobs.models import AiLearningAnalysis, Flashcard, NextActionRecommendation, QuizQuestion, WeakPointCandidate
from ai_jobs.outputs.publishing import normalize_text, text_key

__all__ = [
    "ANALYSES",
    "FLASHCARDS",
    "QUIZZES",
    "RECOMMENDATIONS",
    "WEAK_POINTS",
    "OutputList",
    "normalize_text",
    "text_key",
]


@dataclass(frozen=True)
class OutputList:
    """``GET /ai/<path>``: the user's outputs of one model, newest first, filtered by
    ``targetType``, ``targetId`` and ``jobId``; ``description`` is the API docs'."""

    path: str
    model: type[Model]
    description: str


ANALYSES = OutputList("analyses", AiLearningAnalysis, "Learning state analyses (one per learning_state_analysis job).")
WEAK_POINTS = OutputList(
    "weak-points", WeakPointCandidate, "Weak-point candidates (one per entry of a weak_point_analysis output)."
)
RECOMMENDATIONS = OutputList(
    "recommendations",
    NextActionRecommendation,
    "Next-action recommendations (one per entry of a next_action_planning output).",
)
QUIZZES = OutputList(
    "quizzes",
    QuizQuestion,
    "Published quiz questions of the user's knowledge bases. A question is listed under the job that "
    "published it; a later job's duplicate of it publishes nothing.",
)
FLASHCARDS = OutputList(
    "flashcards",
    Flashcard,
    "Published flashcards of the user's knowledge bases, listed under the job that published each.",
)
