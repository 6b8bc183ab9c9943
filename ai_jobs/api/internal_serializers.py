"""Wire shapes of the internal runtime API, camelCase on the wire."""

from __future__ import annotations

from functools import cache
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail
from rest_framework.settings import api_settings

from ai_jobs import job_types
from ai_jobs.models import AiRuntimeJob, JobStatus, TargetType
from ai_jobs.selectors import POLL_MAX
from config.errors import RuntimeErrorCode
from config.openapi import ChoiceString
from quotas.models import ApiKeyMode

# Bounds that keep every number inside its column: a bigger one is a 400, never a 500.
MAX_TOKENS = 1_000_000_000
MAX_ATTEMPT = 1_000_000


class JobTypeField(serializers.ChoiceField):
    """A registered job type. The registry is read on every use, so the field knows a
    type declared after it was built (a shared serializer instance is reused)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=(), **kwargs)

    @property  # type: ignore[override]
    def choices(self) -> dict[str, str]:
        return dict(job_types.choices())

    @choices.setter
    def choices(self, value: Any) -> None:
        pass  # the registry's

    @property
    def grouped_choices(self) -> dict[str, str]:  # type: ignore[override]
        return self.choices

    @property
    def choice_strings_to_values(self) -> dict[str, str]:  # type: ignore[override]
        return {name: name for name in job_types.names()}


@extend_schema_field(OpenApiTypes.INT)
class EpochMsField(serializers.Field):
    """A datetime as epoch milliseconds (``lockUntil`` in the internal API)."""

    def to_representation(self, value: Any) -> int:
        return int(value.timestamp() * 1000)


# What a job's string fields can be: the enums a generated client switches on (the same
# components as the queries' enums of the same choices).
def job_type_field(**kwargs: Any) -> ChoiceString:
    return ChoiceString(job_types.choices, **kwargs)


def job_status_field(**kwargs: Any) -> ChoiceString:
    return ChoiceString(JobStatus.choices, **kwargs)


def target_type_field(**kwargs: Any) -> ChoiceString:
    return ChoiceString(TargetType.values, **kwargs)


def api_key_mode_field(**kwargs: Any) -> ChoiceString:
    return ChoiceString(ApiKeyMode.choices, **kwargs)


class JobSerializer(serializers.Serializer):
    jobId = serializers.CharField(source="id")
    jobType = job_type_field(source="job_type")
    targetType = target_type_field(source="target_type")
    targetId = serializers.CharField(source="target_id")
    userId = serializers.CharField(source="user_public_id", help_text="The user's opaque id (usr_…)")
    status = job_status_field()
    priority = serializers.IntegerField()
    apiKeyMode = api_key_mode_field(source="api_key_mode")
    credentialId = serializers.CharField(source="credential_id", allow_null=True)
    modelProvider = serializers.CharField(source="model_provider")
    modelName = serializers.CharField(source="model_name")
    promptVersion = serializers.CharField(source="prompt_version", allow_null=True)
    outputSchemaVersion = serializers.CharField(source="output_schema_version", allow_null=True)
    attemptNo = serializers.IntegerField(source="attempt_no")
    retryCount = serializers.IntegerField(source="retry_count")
    maxRetryCount = serializers.IntegerField(source="max_retry_count")
    timeoutSeconds = serializers.IntegerField(source="timeout_seconds")
    params = serializers.JSONField()
    lockUntil = EpochMsField(source="lock_until", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")


class JobsSerializer(serializers.Serializer):
    jobs = JobSerializer(many=True)


@cache
def shared(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    """One reusable instance per serializer class. DRF deep-copies every declared
    field each time a serializer is built; the runtime API's hot paths validate and
    render with a bound instance instead (validation and rendering keep no state
    on the instance)."""
    return serializer_class()


def render(serializer_class: type[serializers.Serializer], instance: Any) -> dict[str, Any]:
    return shared(serializer_class).to_representation(instance)


def validated(serializer: serializers.Serializer, data: Any) -> dict[str, Any]:
    """A bound serializer's validated data, or the ValidationError ``is_valid`` would
    have raised (a body of JSON ``null`` is "No data provided", as DRF says it)."""
    if data is None:
        raise serializers.ValidationError(
            {api_settings.NON_FIELD_ERRORS_KEY: [ErrorDetail("No data provided", code="null")]}
        )
    return serializer.run_validation(data)


def parse(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """Validated data, or a ValidationError the exception handler renders."""
    return validated(shared(serializer_class), data)


def jobs_body(jobs: list[AiRuntimeJob]) -> dict[str, Any]:
    return {"jobs": [render(JobSerializer, job) for job in jobs]}


class PollSerializer(serializers.Serializer):
    capabilities = serializers.ListField(
        child=serializers.CharField(max_length=64),
        allow_empty=False,
        max_length=100,
        help_text="Job types this runtime runs; a type the server does not know matches nothing",
    )
    limit = serializers.IntegerField(
        min_value=1,
        default=10,
        help_text=f"1 or more; at most {POLL_MAX} jobs come back: a larger limit is clamped to {POLL_MAX}",
    )

    def validate_capabilities(self, value: list[str]) -> list[str]:
        known = set(job_types.names())
        return list(dict.fromkeys(name for name in value if name in known))


CLAIM_INCLUDES = ("snapshot", "credential")


class ClaimIdField(serializers.CharField):
    """A string as sent: a number is not a claimId spelled another way."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class ClaimSerializer(PollSerializer):
    include = serializers.ListField(
        child=serializers.ChoiceField(choices=CLAIM_INCLUDES),
        required=False,
        max_length=10,
        help_text="The fast path: each job also carries its snapshot and/or credential, and is "
        "already running (startedAt set) with its lease",
    )
    claimId = ClaimIdField(
        required=False,
        min_length=1,
        max_length=64,
        trim_whitespace=False,
        help_text="Optional, 1 to 64 characters the runtime makes unique per claim, sent again unchanged when the "
        "claim's answer did not come: the same claimId from the same instance answers the jobs that claim took "
        "which this instance still holds, untouched since (no heartbeat, snapshot, credential, result or fail), "
        "with their current leases, and locks nothing more. From another instance it is an ordinary claim",
    )


class EmptySerializer(serializers.Serializer):
    pass


class LockSerializer(serializers.Serializer):
    jobId = serializers.CharField(source="id")
    status = job_status_field()
    lockUntil = EpochMsField(source="lock_until")
    attemptNo = serializers.IntegerField(source="attempt_no")


class HeartbeatSerializer(serializers.Serializer):
    jobId = serializers.CharField()
    lockUntil = serializers.IntegerField(help_text="Epoch milliseconds")
    cancelRequested = serializers.BooleanField()


class SnapshotSerializer(serializers.Serializer):
    """The body of ``GET .../snapshot`` (``ai_jobs.leases.snapshot_body`` writes it: this
    serializer is its schema)."""

    jobId = serializers.CharField(help_text="The job the snapshot was read for")
    snapshotId = serializers.CharField(source="id")
    userId = serializers.CharField(source="user_public_id", help_text="The learner's opaque id (usr_…)")
    targetType = target_type_field(source="target_type")
    targetId = serializers.CharField(source="target_id")
    schemaVersion = serializers.CharField(source="schema_version")
    createdAt = serializers.DateTimeField(source="created_at")
    expiresAt = serializers.DateTimeField(source="expires_at")
    data = serializers.JSONField(source="payload")


class CredentialSerializer(serializers.Serializer):
    apiKeyMode = api_key_mode_field(source="api_key_mode")
    provider = serializers.CharField()
    baseUrl = serializers.CharField(source="base_url")
    modelName = serializers.CharField(source="model_name")
    apiKey = serializers.CharField(source="api_key")


class ClaimedJobSerializer(JobSerializer):
    """A job of a claim with ``include``: it is ``running``, and carries what was asked for."""

    snapshot = SnapshotSerializer(required=False, help_text="The body GET .../snapshot gives (with jobId)")
    credential = CredentialSerializer(required=False, help_text="The body POST .../credential gives")


class ClaimedJobsSerializer(serializers.Serializer):
    jobs = ClaimedJobSerializer(many=True)


class UsageSerializer(serializers.Serializer):
    promptTokens = serializers.IntegerField(min_value=0, max_value=MAX_TOKENS, default=0)
    completionTokens = serializers.IntegerField(min_value=0, max_value=MAX_TOKENS, default=0)
    totalTokens = serializers.IntegerField(min_value=0, max_value=2 * MAX_TOKENS, required=False)


class ResultOutSerializer(serializers.Serializer):
    jobId = serializers.CharField(source="job_id")
    status = serializers.SerializerMethodField()
    resultId = serializers.CharField(source="result_id")
    duplicate = serializers.BooleanField()

    @extend_schema_field({"type": "string", "enum": [JobStatus.SUCCEEDED.value]})
    def get_status(self, submitted: Any) -> str:
        return JobStatus.SUCCEEDED.value


class FailInSerializer(serializers.Serializer):
    attemptNo = serializers.IntegerField(min_value=1, max_value=MAX_ATTEMPT)
    errorCode = serializers.ChoiceField(choices=RuntimeErrorCode.codes())
    errorMessage = serializers.CharField(allow_blank=True, default="", max_length=4000, trim_whitespace=False)


class FailOutSerializer(serializers.Serializer):
    jobId = serializers.CharField(source="job_id")
    status = job_status_field(help_text="Where the job moved: pending (a retry), failed or cancelled")
    retryCount = serializers.IntegerField(source="retry_count")


def cost_cents_field(**kwargs: Any) -> serializers.DecimalField:
    """``costCents`` of a result and of an invocation log: one type, a JSON number of US
    cents with at most 4 decimal places (a decimal string is read too, as earlier
    runtimes send it)."""
    return serializers.DecimalField(
        max_digits=14,
        decimal_places=4,
        min_value=0,
        coerce_to_string=False,
        help_text="US cents, at most 4 decimal places",
        **kwargs,
    )


class InvocationLogSerializer(serializers.Serializer):
    attemptNo = serializers.IntegerField(min_value=1, max_value=MAX_ATTEMPT, source="attempt_no")
    provider = serializers.CharField(max_length=32, default="deepseek")
    modelName = serializers.CharField(max_length=64, source="model_name", required=False, allow_blank=True)
    requestId = serializers.CharField(max_length=128, source="request_id", required=False, allow_null=True)
    startedAt = serializers.DateTimeField(source="started_at", required=False, allow_null=True)
    latencyMs = serializers.IntegerField(
        min_value=0, max_value=86_400_000, source="latency_ms", required=False, allow_null=True
    )
    httpStatus = serializers.IntegerField(
        min_value=0, max_value=999, source="http_status", required=False, allow_null=True
    )
    promptTokens = serializers.IntegerField(min_value=0, max_value=MAX_TOKENS, source="prompt_tokens", required=False)
    completionTokens = serializers.IntegerField(
        min_value=0, max_value=MAX_TOKENS, source="completion_tokens", required=False
    )
    totalTokens = serializers.IntegerField(min_value=0, max_value=MAX_TOKENS, source="total_tokens", required=False)
    costCents = cost_cents_field(source="cost_cents", required=False)
    errorCode = serializers.CharField(max_length=64, source="error_code", required=False, allow_null=True)


class ResultInSerializer(serializers.Serializer):
    attemptNo = serializers.IntegerField(min_value=1, max_value=MAX_ATTEMPT)
    outputSchemaVersion = serializers.CharField(max_length=16, required=False, allow_null=True)
    output = serializers.DictField()
    usage = UsageSerializer(required=False)
    costCents = cost_cents_field(default=0)
    # The attempt's model calls, stored with the result in its transaction (the fast path).
    invocationLogs = InvocationLogSerializer(many=True, required=False, max_length=500)


class InvocationLogsInSerializer(serializers.Serializer):
    logs = InvocationLogSerializer(many=True, allow_empty=False, max_length=500)


class AcceptedSerializer(serializers.Serializer):
    accepted = serializers.IntegerField()
