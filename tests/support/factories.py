from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from accounts.selectors import public_id_of
from ai_jobs.models import AiRuntimeJob
from quotas.models import UserAiSettings


class UserFactory(factory.django.DjangoModelFactory):
    """A fresh user: AI analysis off, as for every new user (consent is opt-in)."""

    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"learner{n}")
    password = factory.django.Password("pw-123456")


def consent(user) -> None:
    """The user turns AI analysis on (their consent)."""
    UserAiSettings.objects.update_or_create(user=user, defaults={"ai_analysis_enabled": True})


class JobFactory(factory.django.DjangoModelFactory):
    """A job of a user who consented to AI analysis (every job made through the API is)."""

    class Meta:
        model = AiRuntimeJob
        skip_postgeneration_save = True

    user = factory.SubFactory(UserFactory)
    job_type = "learning_state_analysis"
    target_type = "user"
    target_id = factory.LazyAttribute(lambda job: public_id_of(job.user))

    @factory.post_generation
    def consented(job, create: bool, extracted: bool | None, **kwargs) -> None:
        if create and extracted is not False:
            consent(job.user)


# Outputs that match each job type's v1 schema (ai_jobs/output_schemas.py).
VALID_OUTPUTS: dict[str, dict] = {
    "learning_state_analysis": {
        "summary": "Steady progress in algebra.",
        "masteryScore": 72.5,
        "level": "proficient",
        "strengths": ["linear equations"],
        "weaknesses": ["fractions"],
        "confidence": 0.8,
    },
    "weak_point_analysis": {
        "weakPoints": [
            {
                "knowledgePointId": None,
                "title": "Fractions",
                "reason": "3 of 5 wrong",
                "severity": "high",
                "evidence": ["attempt 1"],
                "confidence": 0.7,
            }
        ]
    },
    "next_action_planning": {
        "recommendations": [
            {
                "actionType": "review",
                "title": "Review fractions",
                "description": "15 minutes",
                "priority": 1,
                "estimatedMinutes": 15,
            }
        ]
    },
    "quiz_generation": {
        "questions": [
            {
                "questionType": "single_choice",
                "stem": "1/2 + 1/4 = ?",
                "options": ["3/4", "2/6"],
                "answer": "3/4",
                "explanation": "Common denominator 4.",
                "difficulty": "easy",
            }
        ]
    },
    "flashcard_generation": {"flashcards": [{"front": "Numerator", "back": "The top of a fraction"}]},
}
