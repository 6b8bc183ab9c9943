"""Jobs whose result is an output, and the outputs themselves: a knowledge base's job,
a quiz or flashcards to submit, the runtime submitting it, and the user reading it back."""

from __future__ import annotations

from ai_jobs.models import AiRuntimeJob
from tests.support.api import RuntimeClient
from tests.support.factories import JobFactory


def finish(runtime: RuntimeClient, job: AiRuntimeJob, output: dict) -> dict:
    """Lock the job and submit ``output`` as its result through the internal API."""
    lock = runtime.lock(job.id)
    assert lock.status_code == 200, lock.json()
    response = runtime.result(job.id, lock.json()["attemptNo"], output)
    assert response.status_code == 200, response.json()
    return response.json()


def kb_job(knowledge_base, job_type: str = "quiz_generation") -> AiRuntimeJob:
    return JobFactory(
        user=knowledge_base.user, job_type=job_type, target_type="knowledge_base", target_id=knowledge_base.id
    )


def question(stem: str, **fields) -> dict:
    return {
        "questionType": "single_choice",
        "stem": stem,
        "options": ["a", "b"],
        "answer": "a",
        "explanation": "because",
        "difficulty": "easy",
        **fields,
    }


def quiz(*stems: str, **fields) -> dict:
    return {"questions": [question(stem, **fields) for stem in stems]}


def cards(*fronts: str) -> dict:
    return {"flashcards": [{"front": front, "back": f"back of {front}"} for front in fronts]}
