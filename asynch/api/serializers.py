"""Bodies of the model-asynch API, camelCase on the wire."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from drf_spectacular.plumbing import build_choice_field
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from asynch.headers import HeaderSyntaxError, mask_api_key, parse_api_key
from asynch.models import AsynchModel, AsynchModelStat, AsynchTask, TaskState
from asynch.services import model_api_key
from asynch.storage import get_storage
from config import outbound
from config.parsers import unstorable_text

INT_MAX = 2**31 - 1


@extend_schema_field({"type": "integer", "enum": [0, 1]})
class FlagField(serializers.Field):
    """``enabled``: 0/1 on the wire; true/false accepted too."""

    default_error_messages = {"invalid": "Must be 0 or 1."}
    _VALUES = {0: False, 1: True, "0": False, "1": True, "false": False, "true": True}

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        key = data.lower() if isinstance(data, str) else data
        if isinstance(key, int | str) and key in self._VALUES:
            return self._VALUES[key]
        self.fail("invalid")

    def to_representation(self, value: bool) -> int:
        return 1 if value else 0


def _check_base_url(value: str) -> str:
    try:
        outbound.read(value)  # the one reading of a URL; the address rules are the service's
    except outbound.OutboundRefused as refused:
        raise serializers.ValidationError(str(refused)) from None
    return value


def _check_api_key(value: str) -> str:
    try:
        parse_api_key(value)
    except HeaderSyntaxError as error:
        raise serializers.ValidationError(f"Key:Value pairs separated by commas: {error}") from None
    return value


class ModelConfigInSerializer(serializers.Serializer):
    modelName = serializers.RegexField(r"^[\w.:/@+-]{1,128}$", max_length=128, source="model_name")
    baseUrl = serializers.CharField(
        max_length=512, source="base_url", trim_whitespace=False, validators=[_check_base_url]
    )
    route = serializers.CharField(max_length=512, allow_blank=True, default="", trim_whitespace=True)
    httpMethod = serializers.CharField(max_length=8, source="http_method", default="POST")
    apiKey = serializers.CharField(
        max_length=4000, allow_blank=True, default="", source="api_key", validators=[_check_api_key]
    )
    enabled = FlagField(default=True)
    maxConcurrency = serializers.IntegerField(min_value=1, max_value=10_000, default=5, source="max_concurrency")
    queueLimit = serializers.IntegerField(min_value=0, max_value=INT_MAX, default=20, source="queue_limit")
    timeoutSeconds = serializers.IntegerField(min_value=1, max_value=86_400, default=1800, source="timeout_seconds")
    retryTimes = serializers.IntegerField(min_value=0, max_value=100, default=3, source="retry_times")
    retryQueueMaxSeconds = serializers.IntegerField(
        min_value=0, max_value=INT_MAX, default=600, source="retry_queue_max_seconds"
    )
    autoCleanSeconds = serializers.IntegerField(
        min_value=0, max_value=INT_MAX, default=3600, source="auto_clean_seconds"
    )
    remark = serializers.CharField(max_length=2000, allow_blank=True, default="")

    def validate_httpMethod(self, value: str) -> str:
        method = value.strip().upper()
        if method not in ("GET", "POST"):
            raise serializers.ValidationError("GET or POST.")
        return method


class ModelConfigUpdateInSerializer(ModelConfigInSerializer):
    """updateModel's body: ``modelName`` and the fields to change, each with the create
    body's checks, none required and none with a default. A field not sent is left as
    it is, so a client (a generated one too) that changes one field sends that one."""

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for name, field in fields.items():
            if name != "modelName":
                field.required, field.default = False, empty
        return fields


class ModelNameSerializer(serializers.Serializer):
    modelName = serializers.CharField(max_length=128, source="model_name")


class ModelSummarySerializer(serializers.Serializer):
    """What a tenant that is not an admin learns of an enabled model: its name and the
    limits its tasks meet; never where it runs or its keys."""

    modelName = serializers.CharField(source="model_name")
    maxConcurrency = serializers.IntegerField(source="max_concurrency")
    queueLimit = serializers.IntegerField(source="queue_limit", help_text="0: no limit")
    timeoutSeconds = serializers.IntegerField(source="timeout_seconds")
    retryTimes = serializers.IntegerField(source="retry_times")
    retryQueueMaxSeconds = serializers.IntegerField(source="retry_queue_max_seconds")
    autoCleanSeconds = serializers.IntegerField(source="auto_clean_seconds")


class ModelListItemSerializer(ModelSummarySerializer):
    """An item of listModels. Admin tenants and staff get every config in full, as
    getModel gives it (apiKey masked); any other tenant gets the enabled models only,
    with their names and limits and nothing of where they run."""

    id = serializers.CharField(required=False, help_text="admin tenants and staff only")
    baseUrl = serializers.CharField(required=False, help_text="admin tenants and staff only")
    route = serializers.CharField(required=False, help_text="admin tenants and staff only")
    httpMethod = serializers.CharField(required=False, help_text="admin tenants and staff only")
    apiKey = serializers.CharField(required=False, help_text="admin tenants and staff only; masked")
    enabled = FlagField(required=False, help_text="admin tenants and staff only (the others see enabled models)")
    remark = serializers.CharField(required=False, help_text="admin tenants and staff only")
    createdAt = serializers.DateTimeField(required=False, help_text="admin tenants and staff only")
    updatedAt = serializers.DateTimeField(required=False, help_text="admin tenants and staff only")


class ModelConfigOutSerializer(serializers.ModelSerializer):
    modelName = serializers.CharField(source="model_name")
    baseUrl = serializers.CharField(source="base_url")
    route = serializers.CharField()
    httpMethod = serializers.CharField(source="http_method")
    apiKey = serializers.SerializerMethodField()
    enabled = FlagField()
    maxConcurrency = serializers.IntegerField(source="max_concurrency")
    queueLimit = serializers.IntegerField(source="queue_limit")
    timeoutSeconds = serializers.IntegerField(source="timeout_seconds")
    retryTimes = serializers.IntegerField(source="retry_times")
    retryQueueMaxSeconds = serializers.IntegerField(source="retry_queue_max_seconds")
    autoCleanSeconds = serializers.IntegerField(source="auto_clean_seconds")
    remark = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

    class Meta:
        model = AsynchModel
        fields = [
            "id",
            "modelName",
            "baseUrl",
            "route",
            "httpMethod",
            "apiKey",
            "enabled",
            "maxConcurrency",
            "queueLimit",
            "timeoutSeconds",
            "retryTimes",
            "retryQueueMaxSeconds",
            "autoCleanSeconds",
            "remark",
            "createdAt",
            "updatedAt",
        ]

    def get_apiKey(self, model: AsynchModel) -> str:
        try:
            return mask_api_key(model_api_key(model))
        except Exception:  # a key rotated away: still never show anything
            return "****"


def _storable(value: Any) -> Any:
    problem = unstorable_text(value)
    if problem:
        raise serializers.ValidationError(problem)
    return value


class TaskCreateInSerializer(serializers.Serializer):
    modelName = serializers.CharField(max_length=128)
    requestPayload = serializers.DictField(validators=[_storable])
    bizName = serializers.CharField(max_length=128, allow_blank=True, required=False, default="")
    creator = serializers.CharField(max_length=255, allow_blank=True, required=False, default="")


@extend_schema_field(build_choice_field(serializers.ChoiceField(choices=TaskState.choices)))
class TaskStateField(serializers.IntegerField):
    """A task's state (``TaskState``), documented as the enum of its values."""


class TaskCreatedSerializer(serializers.Serializer):
    taskId = serializers.CharField(source="id")
    state = TaskStateField()


class TaskIdQuerySerializer(serializers.Serializer):
    taskId = serializers.CharField(max_length=64)


class TaskBatchInSerializer(serializers.Serializer):
    taskIds = serializers.ListField(child=serializers.CharField(max_length=64), allow_empty=False, max_length=500)


def oss_file_of(state: int, ref: str | None, request: HttpRequest | None) -> str | None:
    if not ref or state not in (TaskState.SUCCEEDED, TaskState.DOWNLOADED):
        return None
    return get_storage().url(ref, request=request)


class TaskResultSerializer(serializers.Serializer):
    taskId = serializers.CharField(source="id")
    state = TaskStateField()
    ossFile = serializers.SerializerMethodField()
    errorMessage = serializers.CharField(source="error_message", allow_null=True)
    retryCount = serializers.IntegerField(source="retry_count")
    createdAt = serializers.DateTimeField(source="created_at")
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)

    def get_ossFile(self, task: AsynchTask) -> str | None:
        return oss_file_of(task.state, task.oss_file, self.context.get("request"))


class BatchItemSerializer(serializers.Serializer):
    taskId = serializers.CharField(source="task_id")
    state = TaskStateField()
    ossFile = serializers.SerializerMethodField()

    def get_ossFile(self, item: Any) -> str | None:
        return oss_file_of(item.state, item.oss_file, self.context.get("request"))


class BatchOutSerializer(serializers.Serializer):
    results = BatchItemSerializer(many=True)


class StatsQuerySerializer(serializers.Serializer):
    day = serializers.DateField(required=False, help_text="a date in PLATFORM_TIMEZONE (the operator's day)")
    modelName = serializers.CharField(max_length=128, required=False)


class StatSerializer(serializers.ModelSerializer):
    day = serializers.DateField(help_text="the operator's day the calls were made on (PLATFORM_TIMEZONE)")
    tenantId = serializers.CharField(source="tenant_id")
    creator = serializers.CharField()
    modelName = serializers.CharField(source="model_name")
    requestCount = serializers.IntegerField(source="request_count")

    class Meta:
        model = AsynchModelStat
        fields = ["day", "tenantId", "creator", "modelName", "requestCount"]


class DeletedSerializer(serializers.Serializer):
    modelName = serializers.CharField()
    deleted = serializers.BooleanField()
