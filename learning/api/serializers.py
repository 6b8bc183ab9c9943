"""Wire shapes of /learning/*, camelCase in both directions.

Input serializers only validate; the services write. On PATCH the same input
serializer runs with ``partial=True`` and only the fields sent are changed: no default
applies (and the schema's PATCH bodies have none, so a generated client sends none)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from learning.models import CONTENT_MAX, DESCRIPTION_MAX, NAME_MAX

ID_MAX = 64
MAX_DURATION_SECONDS = 86_400  # one attempt lasts at most a day
FUTURE_TOLERANCE = dt.timedelta(minutes=5)  # client clocks run a little fast
# Dates far in the past break local-date arithmetic in the snapshots (year 1 minus an offset).
EARLIEST_STUDY = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


class StrictCharField(serializers.CharField):
    """A string, not a number DRF would turn into one."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


def _text(max_length: int) -> serializers.CharField:
    return StrictCharField(max_length=max_length, allow_blank=True, default="", trim_whitespace=False)


def _name() -> serializers.CharField:
    return StrictCharField(max_length=NAME_MAX)


def _id() -> serializers.CharField:
    return StrictCharField(max_length=ID_MAX)


# --- input -----------------------------------------------------------------------------------


class KnowledgeBaseInSerializer(serializers.Serializer):
    name = _name()
    description = _text(DESCRIPTION_MAX)


class MaterialInSerializer(serializers.Serializer):
    knowledgeBaseId = _id()
    title = _name()
    content = _text(CONTENT_MAX)


class KnowledgePointInSerializer(serializers.Serializer):
    knowledgeBaseId = _id()
    name = _name()
    description = _text(DESCRIPTION_MAX)


class StudyRecordInSerializer(serializers.Serializer):
    knowledgePointId = _id()
    isCorrect = serializers.BooleanField()
    score = serializers.FloatField(
        min_value=0,
        max_value=100,
        required=False,
        help_text="0 to 100; a new record's defaults to 100 if correct, else 0",
    )
    durationSeconds = serializers.IntegerField(min_value=0, max_value=MAX_DURATION_SECONDS, default=0)
    studiedAt = serializers.DateTimeField(required=False, help_text="ISO 8601; a new record's defaults to now")

    def validate_studiedAt(self, value: dt.datetime) -> dt.datetime:
        if value > timezone.now() + FUTURE_TOLERANCE:
            raise serializers.ValidationError("An attempt cannot be in the future.")
        if value < EARLIEST_STUDY:
            raise serializers.ValidationError(f"An attempt cannot be before {EARLIEST_STUDY:%Y-%m-%d}.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not self.partial and "score" not in attrs:
            attrs["score"] = 100.0 if attrs["isCorrect"] else 0.0
        return attrs


# --- output ----------------------------------------------------------------------------------


class KnowledgeBaseSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")


class MaterialSerializer(serializers.Serializer):
    id = serializers.CharField()
    knowledgeBaseId = serializers.CharField(source="knowledge_base_id")
    title = serializers.CharField()
    content = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")


class KnowledgePointSerializer(serializers.Serializer):
    id = serializers.CharField()
    knowledgeBaseId = serializers.CharField(source="knowledge_base_id")
    name = serializers.CharField()
    description = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")


class StudyRecordSerializer(serializers.Serializer):
    id = serializers.CharField()
    knowledgePointId = serializers.CharField(source="knowledge_point_id")
    isCorrect = serializers.BooleanField(source="is_correct")
    score = serializers.FloatField()
    durationSeconds = serializers.IntegerField(source="duration_seconds")
    studiedAt = serializers.DateTimeField(source="studied_at")
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")


class LearningProfileInSerializer(serializers.Serializer):
    """For the lead's ``/ai/learning-profile``: PUT sends all fields, PATCH some."""

    goals = _text(DESCRIPTION_MAX)
    level = _text(64)
    preferredStudyTime = _text(64)
    preferences = serializers.DictField(default=dict)

    def validate_preferences(self, value: dict[str, Any]) -> dict[str, Any]:
        encoded = json.dumps(value)
        if len(encoded) > 10_000:
            raise serializers.ValidationError("At most 10,000 characters of preferences.")
        if "\\u0000" in encoded:  # PostgreSQL's jsonb refuses NUL characters
            raise serializers.ValidationError("Null characters are not allowed.")
        return value


class LearningProfileSerializer(serializers.Serializer):
    goals = serializers.CharField()
    level = serializers.CharField()
    preferredStudyTime = serializers.CharField(source="preferred_study_time")
    preferences = serializers.JSONField()
    updatedAt = serializers.DateTimeField(source="updated_at", allow_null=True, help_text="null: never set")
