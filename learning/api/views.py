"""/learning/*: owner-scoped CRUD. Thin: parse, call one selector or
service, serialize. Another user's id answers 404 exactly as a missing one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django.db.models import Model, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from config.errors import ErrorCode
from learning import selectors, services
from learning.api import serializers as s
from quotas.throttles import UserThrottle

# camelCase on the wire -> the services' keyword arguments
_ARGUMENTS = {
    "name": "name",
    "description": "description",
    "title": "title",
    "content": "content",
    "knowledgeBaseId": "knowledge_base_id",
    "knowledgePointId": "knowledge_point_id",
    "isCorrect": "is_correct",
    "score": "score",
    "durationSeconds": "duration_seconds",
    "studiedAt": "studied_at",
}


def _arguments(data: dict[str, Any]) -> dict[str, Any]:
    return {_ARGUMENTS[key]: value for key, value in data.items()}


def _valid(serializer_class: type[serializers.Serializer], request: Request, *, partial: bool) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise serializers.ValidationError({"nonFieldErrors": ["A JSON object is expected."]})
    serializer = serializer_class(data=request.data, partial=partial)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class _ListCreateView(GenericAPIView):
    """``GET`` the user's objects newest first (paginated), ``POST`` a new one (at most
    ``LEARNING_MAX_OBJECTS_PER_USER`` of a kind)."""

    throttle_classes = [UserThrottle]  # USER_THROTTLE_RATE per user, as on /ai/*
    in_serializer: ClassVar[type[serializers.Serializer]]
    out_serializer: ClassVar[type[serializers.Serializer]]
    filter_param: ClassVar[str | None] = None

    def list_objects(self, request: Request, filter_value: str | None) -> QuerySet[Any]:
        raise NotImplementedError

    def create_object(self, request: Request, arguments: dict[str, Any]) -> Model:
        raise NotImplementedError

    def get(self, request: Request) -> Response:
        filter_value = request.query_params.get(self.filter_param) if self.filter_param else None
        page = self.paginate_queryset(self.list_objects(request, filter_value))
        return self.get_paginated_response(self.out_serializer(page, many=True).data)

    def post(self, request: Request) -> Response:
        created = self.create_object(request, _arguments(_valid(self.in_serializer, request, partial=False)))
        return Response(self.out_serializer(created).data, status=status.HTTP_201_CREATED)


class _DetailView(GenericAPIView):
    """``GET``, ``PATCH`` and ``DELETE`` one of the user's objects by id."""

    throttle_classes = [UserThrottle]
    in_serializer: ClassVar[type[serializers.Serializer]]
    out_serializer: ClassVar[type[serializers.Serializer]]
    get_object_of: ClassVar[Callable[..., Model]]
    update_object: ClassVar[Callable[..., Model]]
    delete_object: ClassVar[Callable[..., None]]
    id_argument: ClassVar[str]

    def get(self, request: Request, object_id: str) -> Response:
        obj = type(self).get_object_of(user=request.user, **{self.id_argument: object_id})
        return Response(self.out_serializer(obj).data)

    def patch(self, request: Request, object_id: str) -> Response:
        arguments = _arguments(_valid(self.in_serializer, request, partial=True))
        obj = type(self).update_object(user=request.user, **{self.id_argument: object_id}, **arguments)
        return Response(self.out_serializer(obj).data)

    def delete(self, request: Request, object_id: str) -> Response:
        type(self).delete_object(user=request.user, **{self.id_argument: object_id})
        return Response(status=status.HTTP_204_NO_CONTENT)


KB_FILTER = OpenApiParameter("knowledgeBaseId", str, description="Only those of this knowledge base")
KP_FILTER = OpenApiParameter("knowledgePointId", str, description="Only those of this knowledge point")


def _list_schema(
    in_serializer: type[serializers.Serializer],
    out_serializer: type[serializers.Serializer],
    *parameters: OpenApiParameter,
    kind: str,
) -> Callable[[type], type]:
    listed = f"List the caller's {kind}s, newest first."
    created = (
        f"Create a {kind} of the caller's. A learner holds at most `LEARNING_MAX_OBJECTS_PER_USER` of them; "
        "an id it names (a knowledge base, a knowledge point) must be the caller's own."
    )
    return extend_schema_view(
        get=extend_schema(
            tags=["learning"], responses=out_serializer(many=True), parameters=list(parameters), description=listed
        ),
        post=extend_schema(
            tags=["learning"], request=in_serializer, responses={201: out_serializer}, description=created
        ),
    )


def _detail_schema(
    in_serializer: type[serializers.Serializer], out_serializer: type[serializers.Serializer], *, kind: str
) -> Callable[[type], type]:
    mine = "another learner's answers exactly as a missing one."
    return extend_schema_view(
        get=extend_schema(
            tags=["learning"], responses=out_serializer, description=f"Read one of the caller's {kind}s; {mine}"
        ),
        patch=extend_schema(
            tags=["learning"],
            request=in_serializer,
            responses=out_serializer,
            description=f"Change one of the caller's {kind}s: only the fields sent change.",
        ),
        delete=extend_schema(
            tags=["learning"],
            responses={204: None},
            description=f"Delete one of the caller's {kind}s, and what it holds.",
        ),
    )


# --- knowledge bases -------------------------------------------------------------------------


@_list_schema(s.KnowledgeBaseInSerializer, s.KnowledgeBaseSerializer, kind="knowledge base")
class KnowledgeBaseListView(_ListCreateView):
    error_codes = {"post": (ErrorCode.LEARNING_LIMIT_EXCEEDED,)}
    in_serializer = s.KnowledgeBaseInSerializer
    out_serializer = serializer_class = s.KnowledgeBaseSerializer

    def list_objects(self, request: Request, filter_value: str | None) -> QuerySet[Any]:
        return selectors.knowledge_base_list(user=request.user)

    def create_object(self, request: Request, arguments: dict[str, Any]) -> Model:
        return services.knowledge_base_create(user=request.user, **arguments)


@_detail_schema(s.KnowledgeBaseInSerializer, s.KnowledgeBaseSerializer, kind="knowledge base")
class KnowledgeBaseDetailView(_DetailView):
    in_serializer = s.KnowledgeBaseInSerializer
    out_serializer = serializer_class = s.KnowledgeBaseSerializer
    get_object_of = selectors.knowledge_base_get
    update_object = services.knowledge_base_update
    delete_object = services.knowledge_base_delete
    id_argument = "knowledge_base_id"


# --- materials ----------------------------------------------------------------------------------


@_list_schema(s.MaterialInSerializer, s.MaterialSerializer, KB_FILTER, kind="material")
class MaterialListView(_ListCreateView):
    # a knowledge base that is not the user's; one object too many
    error_codes = {"post": (ErrorCode.NOT_FOUND, ErrorCode.LEARNING_LIMIT_EXCEEDED)}
    in_serializer = s.MaterialInSerializer
    out_serializer = serializer_class = s.MaterialSerializer
    filter_param = "knowledgeBaseId"

    def list_objects(self, request: Request, filter_value: str | None) -> QuerySet[Any]:
        return selectors.material_list(user=request.user, knowledge_base_id=filter_value)

    def create_object(self, request: Request, arguments: dict[str, Any]) -> Model:
        return services.material_create(user=request.user, **arguments)


@_detail_schema(s.MaterialInSerializer, s.MaterialSerializer, kind="material")
class MaterialDetailView(_DetailView):
    in_serializer = s.MaterialInSerializer
    out_serializer = serializer_class = s.MaterialSerializer
    get_object_of = selectors.material_get
    update_object = services.material_update
    delete_object = services.material_delete
    id_argument = "material_id"


# --- knowledge points ---------------------------------------------------------------------------


@_list_schema(s.KnowledgePointInSerializer, s.KnowledgePointSerializer, KB_FILTER, kind="knowledge point")
class KnowledgePointListView(_ListCreateView):
    error_codes = {"post": (ErrorCode.NOT_FOUND, ErrorCode.LEARNING_LIMIT_EXCEEDED)}
    in_serializer = s.KnowledgePointInSerializer
    out_serializer = serializer_class = s.KnowledgePointSerializer
    filter_param = "knowledgeBaseId"

    def list_objects(self, request: Request, filter_value: str | None) -> QuerySet[Any]:
        return selectors.knowledge_point_list(user=request.user, knowledge_base_id=filter_value)

    def create_object(self, request: Request, arguments: dict[str, Any]) -> Model:
        return services.knowledge_point_create(user=request.user, **arguments)


@_detail_schema(s.KnowledgePointInSerializer, s.KnowledgePointSerializer, kind="knowledge point")
class KnowledgePointDetailView(_DetailView):
    in_serializer = s.KnowledgePointInSerializer
    out_serializer = serializer_class = s.KnowledgePointSerializer
    get_object_of = selectors.knowledge_point_get
    update_object = services.knowledge_point_update
    delete_object = services.knowledge_point_delete
    id_argument = "knowledge_point_id"


# --- study records ----------------------------------------------------------------------------------


@_list_schema(s.StudyRecordInSerializer, s.StudyRecordSerializer, KP_FILTER, kind="study record")
class StudyRecordListView(_ListCreateView):
    error_codes = {"post": (ErrorCode.NOT_FOUND, ErrorCode.LEARNING_LIMIT_EXCEEDED)}
    in_serializer = s.StudyRecordInSerializer
    out_serializer = serializer_class = s.StudyRecordSerializer
    filter_param = "knowledgePointId"

    def list_objects(self, request: Request, filter_value: str | None) -> QuerySet[Any]:
        return selectors.study_record_list(user=request.user, knowledge_point_id=filter_value)

    def create_object(self, request: Request, arguments: dict[str, Any]) -> Model:
        return services.study_record_create(user=request.user, **arguments)


@_detail_schema(s.StudyRecordInSerializer, s.StudyRecordSerializer, kind="study record")
class StudyRecordDetailView(_DetailView):
    in_serializer = s.StudyRecordInSerializer
    out_serializer = serializer_class = s.StudyRecordSerializer
    get_object_of = selectors.study_record_get
    update_object = services.study_record_update
    delete_object = services.study_record_delete
    id_argument = "study_record_id"
