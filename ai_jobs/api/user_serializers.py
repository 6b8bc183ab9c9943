"""Wire shapes of the user's job API."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ai_jobs import job_types, selectors
from ai_jobs.api.internal_serializers import JobSerializer, JobTypeField, validated
from ai_jobs.models import ApiKeyMode, JobStatus, TargetType
from config.openapi import ChoiceString


class JobUsageSerializer(serializers.Serializer):
    """What a job cost: every model call of every attempt, the accepted one included."""

    promptTokens = serializers.IntegerField(source="prompt_tokens", help_text="Prompt tokens of every model call")
    completionTokens = serializers.IntegerField(
        source="completion_tokens", help_text="Completion tokens of every model call"
    )
    totalTokens = serializers.IntegerField(source="total_tokens", help_text="Tokens of every model call")
    costCents = serializers.DecimalField(
        source="cost_cents",
        max_digits=16,
        decimal_places=4,
        coerce_to_string=False,
        help_text="US cents of every model call, at most 4 decimal places",
    )
    calls = serializers.IntegerField(
        help_text="Model calls counted: the accepted result's, and each that ended in an error (any attempt)"
    )


@extend_schema_field(JobUsageSerializer)
class JobUsageField(serializers.Field):
    """``usage``, read from the job's row as ``selectors.with_usage`` annotated it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, job: Any) -> dict[str, Any]:
        # Built here, not by JobUsageSerializer (the schema's): every job answer carries it.
        spent = selectors.job_usage(job)
        return {
            "promptTokens": spent.prompt_tokens,
            "completionTokens": spent.completion_tokens,
            "totalTokens": spent.total_tokens,
            "costCents": _COST.to_representation(spent.cost_cents),
            "calls": spent.calls,
        }


_COST = JobUsageSerializer().fields["costCents"]


class UserJobSerializer(JobSerializer):
    errorCode = serializers.CharField(source="error_code", allow_null=True)
    errorMessage = serializers.CharField(source="error_message", allow_null=True)
    cancelRequested = serializers.BooleanField(source="cancel_requested")
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)
    retriedFromJobId = serializers.CharField(source="retried_from_job_id", allow_null=True)
    rerunAs = serializers.CharField(
        source="rerun_as_id", allow_null=True, help_text="the job an operator reran this failed one as"
    )
    usage = JobUsageField(
        help_text="What the job cost so far: the tokens and cost of every model call of every attempt "
        "(the accepted result's call and each call that ended in an error)"
    )


class JobCreateSerializer(serializers.Serializer):
    # Free text here: an unknown type is INVALID_JOB_TYPE / INVALID_TARGET_TYPE, not a validation error.
    # (The schema documents each as its enum: a client has the union to choose from.)
    jobType = ChoiceString(job_types.choices, max_length=64, allow_blank=True)
    targetType = ChoiceString(TargetType.values, max_length=64, allow_blank=True)
    targetId = serializers.CharField(max_length=64)
    apiKeyMode = serializers.ChoiceField(choices=ApiKeyMode.choices, required=False)
    credentialId = serializers.CharField(max_length=40, required=False, allow_null=True, allow_blank=True)
    idempotencyKey = serializers.CharField(max_length=128, required=False, allow_null=True, allow_blank=True)
    priority = serializers.IntegerField(
        min_value=0, max_value=100, default=0, help_text="The job's priority, 0 the highest."
    )
    params = serializers.DictField(required=False, default=dict)
    # And each job type's count parameter (questionCount, cardCount, ...): get_fields.

    def get_fields(self) -> dict[str, serializers.Field]:
        """The declared fields, and one per count parameter of the registered job types,
        bounded by the widest of their declarations (``validate`` holds each type to its own)."""
        fields = super().get_fields()
        for name, counts in job_types.count_params().items():
            fields[name] = serializers.IntegerField(
                required=False,
                min_value=min(count.low for count in counts),
                max_value=max(count.high for count in counts),
                help_text="How many to make, for "
                + ", ".join(job_type.name for job_type in job_types.all_types() if job_type.count in counts)
                + " (also taken inside `params`).",
            )
        return fields

    def validate_params(self, value: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(value)) > 4000:
            raise serializers.ValidationError("At most 4,000 characters of params.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """``questionCount`` / ``cardCount`` at the top level (as the mobile app sends them)
        or inside ``params``; either way they end in ``params``, with their default."""
        params = dict(attrs.get("params") or {})
        declared = job_types.get(attrs["jobType"])
        count = declared.count if declared is not None else None
        if count is not None:
            value = attrs.pop(count.name, None)
            if value is None:
                value = params.get(count.name, count.default)
            if isinstance(value, bool) or not isinstance(value, int) or not count.low <= value <= count.high:
                raise serializers.ValidationError({count.name: [f"A whole number from {count.low} to {count.high}."]})
            params[count.name] = value
        for name in job_types.count_params():
            attrs.pop(name, None)
        attrs["params"] = params
        return attrs


@cache
def _job_create_serializer(declared: tuple[tuple[str, job_types.CountParam | None], ...]) -> JobCreateSerializer:
    return JobCreateSerializer()


def job_create_parse(data: Any) -> dict[str, Any]:
    """``POST /ai/jobs``'s validated body, or a ValidationError the exception handler
    renders. One bound serializer per set of registered types and their count
    parameters (its fields follow them), not one built per request (DRF deep-copies
    every declared field of each serializer it builds)."""
    declared = tuple((job_type.name, job_type.count) for job_type in job_types.all_types())
    return validated(_job_create_serializer(declared), data)


class JobListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=JobStatus.choices, required=False)
    jobType = JobTypeField(required=False)
