"""What a job's result becomes (contract §5). Filled in by the records work:
analyses, weak points, recommendations, quiz questions and flashcards."""

from __future__ import annotations

from ai_jobs.models import AiRuntimeJob, AiRuntimeResult


def result_persist(*, job: AiRuntimeJob, result: AiRuntimeResult) -> None:
    """Turn an accepted result into the job type's records, inside the result's transaction."""
