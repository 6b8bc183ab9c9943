"""Wire shapes of the output lists and notifications, camelCase.

Every output carries ``id``, ``jobId``, the job's ``targetType``/``targetId`` and
``createdAt``, then the fields of its job type's output. ``SERIALIZERS``
says which shape each output model has on the wire (an output model a new job type
adds gets its serializer there)."""

from __future__ import annotations

from typing import Any

from django.db.models import Model
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ai_jobs.api.internal_serializers import job_type_field, target_type_field
from ai_jobs.models import (
    ActionType,
    AiLearningAnalysis,
    Difficulty,
    Flashcard,
    Level,
    NextActionRecommendation,
    Notification,
    NotificationKind,
    QuestionType,
    QuizQuestion,
    Severity,
    TargetType,
    WeakPointCandidate,
)

ID_MAX = 64


# --- filters -------------------------------------------------------------------------------------


class OutputFilterSerializer(serializers.Serializer):
    targetType = serializers.ChoiceField(choices=TargetType.values, required=False)
    targetId = serializers.CharField(max_length=ID_MAX, required=False)
    jobId = serializers.CharField(max_length=ID_MAX, required=False)


class NotificationFilterSerializer(OutputFilterSerializer):
    isRead = serializers.BooleanField(required=False)


FILTER_ARGUMENTS = {"targetType": "target_type", "targetId": "target_id", "jobId": "job_id", "isRead": "is_read"}


# --- outputs ---------------------------------------------------------------------------------------


class _OutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    jobId = serializers.CharField(source="job_id")
    targetType = serializers.ChoiceField(source="target_type", choices=TargetType.values)
    targetId = serializers.CharField(source="target_id")
    createdAt = serializers.DateTimeField(source="created_at")


def _strings() -> serializers.ListField:
    return serializers.ListField(child=serializers.CharField())


class AnalysisSerializer(_OutputSerializer):
    summary = serializers.CharField()
    masteryScore = serializers.FloatField(source="mastery_score")
    level = serializers.ChoiceField(choices=Level.values)
    strengths = _strings()
    weaknesses = _strings()
    confidence = serializers.FloatField()


class WeakPointSerializer(_OutputSerializer):
    knowledgePointId = serializers.CharField(source="knowledge_point_id", allow_null=True)
    title = serializers.CharField()
    reason = serializers.CharField()
    severity = serializers.ChoiceField(choices=Severity.values)
    evidence = _strings()
    confidence = serializers.FloatField()


class RecommendationSerializer(_OutputSerializer):
    actionType = serializers.ChoiceField(source="action_type", choices=ActionType.values)
    title = serializers.CharField()
    description = serializers.CharField()
    priority = serializers.IntegerField()
    estimatedMinutes = serializers.IntegerField(source="estimated_minutes")
    actionTargetType = target_type_field(
        source="action_target_type",
        allow_null=True,
        help_text="The output's targetType: what to act on (null unless it names the user or one of their objects)",
    )
    actionTargetId = serializers.CharField(source="action_target_id", allow_null=True)


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]})
class AnswerField(serializers.JSONField):
    """A string, or a list of strings (multiple choice)."""


class QuizQuestionSerializer(_OutputSerializer):
    knowledgeBaseId = serializers.CharField(source="knowledge_base_id")
    knowledgePointId = serializers.CharField(source="knowledge_point_id", allow_null=True)
    questionType = serializers.ChoiceField(source="question_type", choices=QuestionType.values)
    stem = serializers.CharField()
    options = _strings()
    answer = AnswerField()
    explanation = serializers.CharField()
    difficulty = serializers.ChoiceField(choices=Difficulty.values)


class FlashcardSerializer(_OutputSerializer):
    knowledgeBaseId = serializers.CharField(source="knowledge_base_id")
    knowledgePointId = serializers.CharField(source="knowledge_point_id", allow_null=True)
    front = serializers.CharField()
    back = serializers.CharField()
    hint = serializers.CharField(allow_null=True)
    tags = _strings()


class NotificationSerializer(_OutputSerializer):
    kind = serializers.ChoiceField(choices=NotificationKind.values)
    jobType = job_type_field(source="job_type")
    title = serializers.CharField()
    message = serializers.CharField()
    data = serializers.DictField(help_text="What the job produced: counts, or the failure's errorCode")
    isRead = serializers.SerializerMethodField()
    readAt = serializers.DateTimeField(source="read_at", allow_null=True)

    def get_isRead(self, notification: Notification) -> bool:
        return notification.read_at is not None


SERIALIZERS: dict[type[Model], type[serializers.Serializer]] = {
    AiLearningAnalysis: AnalysisSerializer,
    WeakPointCandidate: WeakPointSerializer,
    NextActionRecommendation: RecommendationSerializer,
    QuizQuestion: QuizQuestionSerializer,
    Flashcard: FlashcardSerializer,
}


def filters_of(serializer_class: type[serializers.Serializer], query: dict[str, Any]) -> dict[str, Any]:
    """The selector's keyword arguments from the query string; a bad value is a
    ValidationError (400 VALIDATION_ERROR)."""
    serializer = serializer_class(data=query)
    serializer.is_valid(raise_exception=True)
    return {FILTER_ARGUMENTS[key]: value for key, value in serializer.validated_data.items()}
