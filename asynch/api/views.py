"""The model-asynch API. Thin: parse, call one service, render."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from asynch import selectors, services
from asynch.api import serializers as s
from asynch.api.authentication import (
    IsModelAdmin,
    IsTenant,
    IsTenantOrStaff,
    IsTenantOrStatsViewer,
    TenantApiKeyAuthentication,
    may_change_models,
    tenant_of,
)
from asynch.storage import FORWARDED_HEADERS, download_name, get_storage, media_type_of
from config import jsondepth
from config.errors import DomainError, ErrorCode
from config.pagination import PAGE_PARAMETERS, ContractCursorPagination, page_of

# A staff user's JWT: the project's user authentication (its DEFAULT_AUTHENTICATION_CLASSES).
USER_AUTHENTICATION = list(api_settings.DEFAULT_AUTHENTICATION_CLASSES)


def _valid(serializer_class: type[serializers.Serializer], data: Any, **kwargs: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class ModelAdminView(APIView):
    authentication_classes = [TenantApiKeyAuthentication, *USER_AUTHENTICATION]
    permission_classes = [IsModelAdmin]
    error_codes: tuple[ErrorCode, ...] = (ErrorCode.FORBIDDEN,)


class TaskView(APIView):
    authentication_classes = [TenantApiKeyAuthentication]
    permission_classes = [IsTenant]


def _config(model: Any, status_code: int = status.HTTP_200_OK) -> Response:
    return Response(s.ModelConfigOutSerializer(model).data, status=status_code)


# Seed 003's example body of createModel, as written.
SEED_MODEL = {
    "modelName": "model-service",
    "baseUrl": "http://127.0.0.1:8000",
    "route": "/api/v1/chat",
    "httpMethod": "POST",
    "apiKey": "API_KEY:model-key,API_STATE:true,API_NUM:123",
    "enabled": 1,
    "maxConcurrency": 5,
    "queueLimit": 20,
    "timeoutSeconds": 1800,
    "retryTimes": 3,
    "retryQueueMaxSeconds": 600,
    "autoCleanSeconds": 3600,
    "remark": "Model-Service 模型服务",
}


@extend_schema(
    tags=["model-asynch"],
    request=s.ModelConfigInSerializer,
    responses={201: s.ModelConfigOutSerializer},
    examples=[OpenApiExample("A model service (seed 003)", value=SEED_MODEL, request_only=True)],
)
class ModelCreateView(ModelAdminView):
    """Create a model config: the model service a tenant's tasks call (seed 003's first step).

    `modelName` is its unique key; the `baseUrl` must be a host the operator allows. Needs an
    admin tenant's key or a staff user's JWT."""

    def post(self, request: Request) -> Response:
        data = _valid(s.ModelConfigInSerializer, request.data)
        return _config(services.model_create(**data), status.HTTP_201_CREATED)


@extend_schema(tags=["model-asynch"], request=s.ModelConfigUpdateInSerializer, responses=s.ModelConfigOutSerializer)
class ModelUpdateView(ModelAdminView):
    """Change a model config by `modelName`: a partial update, only the fields sent change."""

    error_codes = (ErrorCode.FORBIDDEN, ErrorCode.MODEL_NOT_FOUND)

    def post(self, request: Request) -> Response:
        data = _valid(s.ModelConfigUpdateInSerializer, request.data)
        return _config(services.model_update(**data))


@extend_schema(tags=["model-asynch"], request=s.ModelNameSerializer, responses=s.DeletedSerializer)
class ModelDeleteView(ModelAdminView):
    """Delete a model config by `modelName`; tasks already queued for it fail."""

    error_codes = (ErrorCode.FORBIDDEN, ErrorCode.MODEL_NOT_FOUND)

    def post(self, request: Request) -> Response:
        name = _valid(s.ModelNameSerializer, request.data)["model_name"]
        services.model_delete(model_name=name)
        return Response({"modelName": name, "deleted": True})


@extend_schema(
    tags=["model-asynch"],
    parameters=[OpenApiParameter("modelName", str, required=True)],
    responses=s.ModelConfigOutSerializer,
)
class ModelGetView(ModelAdminView):
    """Read one model config by `modelName`, in full (its `apiKey` masked)."""

    error_codes = (ErrorCode.FORBIDDEN, ErrorCode.MODEL_NOT_FOUND)

    def get(self, request: Request) -> Response:
        name = _valid(s.ModelNameSerializer, request.query_params)["model_name"]
        model = selectors.model_get(model_name=name)
        if model is None:
            raise DomainError(ErrorCode.MODEL_NOT_FOUND, f"Model {name} is not configured")
        return _config(model)


class _ModelPages(ContractCursorPagination):
    ordering = ("created_at", "id")


@extend_schema(tags=["model-asynch"], parameters=PAGE_PARAMETERS, responses=page_of(s.ModelListItemSerializer))
class ModelListView(APIView):
    """List the model configs the caller may see.

    Admin tenants and staff who may change model configs: every config, in full
    (``apiKey`` masked). Any other tenant, or staff without that permission: the enabled
    models a tenant may name in ``createTask``, with their limits only."""

    authentication_classes = [TenantApiKeyAuthentication, *USER_AUTHENTICATION]
    permission_classes = [IsTenantOrStaff]

    def get(self, request: Request) -> Response:
        full = may_change_models(request.user)
        paginator = _ModelPages()
        page = paginator.paginate_queryset(selectors.models_list(enabled_only=not full), request, view=self)
        serializer = s.ModelConfigOutSerializer if full else s.ModelSummarySerializer
        return paginator.get_paginated_response(serializer(page, many=True).data)


class _StatPages(ContractCursorPagination):
    ordering = ("-day", "-id")


@extend_schema(
    tags=["model-asynch"], parameters=[s.StatsQuerySerializer, *PAGE_PARAMETERS], responses=page_of(s.StatSerializer)
)
class StatsView(APIView):
    """Read the daily counts of tasks created, by tenant, creator and model: a tenant sees its
    own, an admin tenant or staff every tenant's."""

    authentication_classes = [TenantApiKeyAuthentication, *USER_AUTHENTICATION]
    permission_classes = [IsTenantOrStatsViewer]
    error_codes = (ErrorCode.FORBIDDEN,)

    def get(self, request: Request) -> Response:
        query = _valid(s.StatsQuerySerializer, request.query_params)
        tenant = tenant_of(request)
        sees_all = tenant is None or tenant.is_admin  # staff who may view them, or an admin tenant
        rows = selectors.stats_list(
            tenant=None if sees_all else tenant, day=query.get("day"), model_name=query.get("modelName")
        )
        paginator = _StatPages()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(s.StatSerializer(page, many=True).data)


def _creator(request: Request, body_creator: str) -> str:
    """``X-User-Info`` names the creator (its user id when it is a JSON object), else the body's ``creator``."""
    info = request.headers.get("X-User-Info", "").strip()
    if not info:
        return body_creator
    try:
        parsed = jsondepth.loads(info)  # a header of "[[[[...": not JSON to us, never a RecursionError
    except ValueError:
        return info[:255]
    if isinstance(parsed, dict):
        for key in ("userId", "user_id", "id", "username", "name"):
            if parsed.get(key) not in (None, ""):
                return str(parsed[key])[:255]
    return info[:255]


@extend_schema(
    tags=["model-asynch"],
    request=s.TaskCreateInSerializer,
    responses={201: s.TaskCreatedSerializer},
)
class TaskCreateView(TaskView):
    """Queue a call to a model: the answer is the task's id, `state` 0 (queued).

    A worker calls the model service with `requestPayload` as it is, retries as the model
    config says, and stores the answer; poll `getTaskResult` or pick up a batch with
    `getTaskBatch`. `X-User-Info` names the creator when sent."""

    error_codes = (ErrorCode.MODEL_NOT_FOUND, ErrorCode.MODEL_DISABLED, ErrorCode.QUEUE_LIMIT_EXCEEDED)

    def post(self, request: Request) -> Response:
        data = _valid(s.TaskCreateInSerializer, request.data)
        task = services.task_create(
            tenant=tenant_of(request),
            model_name=data["modelName"],
            request_payload=data["requestPayload"],
            biz_name=data["bizName"],
            creator=_creator(request, data["creator"]),
            forward_headers={name: request.headers.get(name, "") for name in FORWARDED_HEADERS},
        )
        return Response({"taskId": task.id, "state": task.state}, status=status.HTTP_201_CREATED)


@extend_schema(
    tags=["model-asynch"],
    parameters=[OpenApiParameter("taskId", str, required=True)],
    responses={200: s.TaskResultSerializer, 304: None},
)
class TaskResultView(TaskView):
    """Read one of the tenant's tasks by `taskId`: its state and, once it succeeded, `ossFile`,
    the signed URL of the stored answer. Answers with a strong
    ``ETag``; a request whose ``If-None-Match`` names the current one gets ``304 Not Modified``
    with no body."""

    error_codes = (ErrorCode.NOT_FOUND,)

    def get(self, request: Request) -> Response:
        task_id = _valid(s.TaskIdQuerySerializer, request.query_params)["taskId"]
        task = selectors.task_get(tenant=tenant_of(request), task_id=task_id)
        if task is None:
            raise DomainError(ErrorCode.NOT_FOUND, f"Task {task_id} not found")
        tag = task_etag(task)
        named = if_none_match(request)
        if tag in named or "*" in named:
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": tag})
        return Response(s.TaskResultSerializer(task, context={"request": request}).data, headers={"ETag": tag})


def task_etag(task: Any) -> str:
    """A strong tag of what ``getTaskResult`` says of the task: its state and fields,
    with the stored file's name rather than its link (a fresh signature each time)."""
    fields = (task.id, task.state, task.oss_file, task.error_message, task.retry_count, task.created_at.isoformat(),
              task.finished_at.isoformat() if task.finished_at else "")  # fmt: skip
    return '"' + hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:32] + '"'


def if_none_match(request: Request) -> set[str]:
    """The tags an ``If-None-Match`` names (weak ones compared by their value)."""
    header = request.headers.get("If-None-Match", "")
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}


@extend_schema(tags=["model-asynch"], request=s.TaskBatchInSerializer, responses=s.BatchOutSerializer)
class TaskBatchView(TaskView):
    """Pick up several of the tenant's tasks at once: each succeeded task (state 2) becomes
    picked up (state 4) and is cleaned up `autoCleanSeconds` later; unknown ids are left out."""

    def post(self, request: Request) -> Response:
        task_ids = _valid(s.TaskBatchInSerializer, request.data)["taskIds"]
        items = services.tasks_pickup(tenant=tenant_of(request), task_ids=task_ids)
        return Response({"results": s.BatchItemSerializer(items, many=True, context={"request": request}).data})


_DOWNLOADED = (
    "The stored answer: `application/json` when it is JSON, `application/octet-stream` otherwise; "
    "always with `Content-Disposition: attachment` and `X-Content-Type-Options: nosniff`: "
    "a stored answer is never served as a page."
)


@extend_schema(
    tags=["model-asynch"],
    # The bytes first: a generated client reads the body as the first media type it
    # knows, and bytes hold any answer (a JSON one too); JSON is for those that ask.
    responses={
        (200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY, description=_DOWNLOADED),
        (200, "application/json"): OpenApiResponse(OpenApiTypes.ANY, description=_DOWNLOADED),
    },
)
class DownloadView(APIView):
    """A stored result at its signed, expiring URL: the URL is the permission. It is
    JSON or bytes, whatever the model said it was, and always a download."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    def get(self, request: Request, token: str) -> FileResponse:
        name = download_name(token)
        storage = get_storage()
        if name is None or not hasattr(storage, "storage"):
            raise DomainError(ErrorCode.NOT_FOUND, "This download link is invalid or has expired")
        try:
            handle = storage.storage.open(name, "rb")
        except (FileNotFoundError, OSError):
            raise DomainError(ErrorCode.NOT_FOUND, "The result is no longer stored") from None
        response = FileResponse(
            handle, as_attachment=True, filename=name.rsplit("/", 1)[-1], content_type=media_type_of(name)
        )
        response["X-Content-Type-Options"] = "nosniff"
        return response
