"""Wire shapes of the user's job API (contract §4)."""

from __future__ import annotations

import json
from typing import Any

from rest_framework import serializers

from ai_jobs.api.serializers import JobSerializer
from ai_jobs.models import ApiKeyMode, JobStatus, JobType

COUNT_LIMITS = {
    JobType.QUIZ_GENERATION.value: ("questionCount", 1, 50, 10),
    JobType.FLASHCARD_GENERATION.value: ("cardCount", 1, 100, 20),
}


class UserJobSerializer(JobSerializer):
    errorCode = serializers.CharField(source="error_code", allow_null=True)
    errorMessage = serializers.CharField(source="error_message", allow_null=True)
    cancelRequested = serializers.BooleanField(source="cancel_requested")
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)
    retriedFromJobId = serializers.CharField(source="retried_from_job_id", allow_null=True)


class JobCreateSerializer(serializers.Serializer):
    # Free text here: an unknown type is INVALID_JOB_TYPE / INVALID_TARGET_TYPE, not a validation error.
    jobType = serializers.CharField(max_length=64, allow_blank=True)
    targetType = serializers.CharField(max_length=64, allow_blank=True)
    targetId = serializers.CharField(max_length=64)
    apiKeyMode = serializers.ChoiceField(choices=ApiKeyMode.choices, required=False)
    credentialId = serializers.CharField(max_length=40, required=False, allow_null=True, allow_blank=True)
    idempotencyKey = serializers.CharField(max_length=128, required=False, allow_null=True, allow_blank=True)
    priority = serializers.IntegerField(min_value=0, max_value=100, default=0, help_text="0 is the highest")
    params = serializers.DictField(required=False, default=dict)
    questionCount = serializers.IntegerField(required=False, min_value=1, max_value=50, help_text="quiz_generation")
    cardCount = serializers.IntegerField(required=False, min_value=1, max_value=100, help_text="flashcard_generation")

    def validate_params(self, value: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(value)) > 4000:
            raise serializers.ValidationError("At most 4,000 characters of params.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """``questionCount`` / ``cardCount`` at the top level (as in the seed's example)
        or inside ``params``; either way they end in ``params``, with their default."""
        params = dict(attrs.get("params") or {})
        limits = COUNT_LIMITS.get(attrs["jobType"])
        if limits is not None:
            name, low, high, default = limits
            value = attrs.pop(name, None)
            if value is None:
                value = params.get(name, default)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise serializers.ValidationError({name: [f"A whole number from {low} to {high}."]})
            params[name] = value
        attrs.pop("questionCount", None)
        attrs.pop("cardCount", None)
        attrs["params"] = params
        return attrs


class JobListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=JobStatus.choices, required=False)
    jobType = serializers.ChoiceField(choices=JobType.choices, required=False)
