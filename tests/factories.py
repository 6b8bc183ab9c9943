from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from ai_jobs.models import AiRuntimeJob


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"learner{n}")
    password = factory.django.Password("pw-123456")


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AiRuntimeJob

    user = factory.SubFactory(UserFactory)
    job_type = "learning_state_analysis"
    target_type = "user"
    target_id = factory.LazyAttribute(lambda job: str(job.user.pk))


# Outputs that match each job type's v1 schema (contract §5).
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
