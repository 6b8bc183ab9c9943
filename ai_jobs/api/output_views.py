"""The output lists (/ai/analyses, /ai/weak-points, ... : one per ``OutputList`` of the
registered job types) and /ai/notifications. Thin: parse the filters,
call one selector or service, serialize. Every read is the signed-in user's own;
another user's notification answers 404 exactly as a missing one."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db.models import Model
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from ai_jobs import notifications, selectors
from ai_jobs.api import output_serializers as s
from ai_jobs.models import TargetType
from ai_jobs.outputs import OutputList
from config.etag import IF_NONE_MATCH, NOT_MODIFIED, conditional
from quotas.throttles import UserThrottle

FILTERS = [
    OpenApiParameter("targetType", str, enum=TargetType.values, description="Only those of jobs on this target type"),
    OpenApiParameter("targetId", str, description="Only those of jobs on this target"),
    OpenApiParameter("jobId", str, description="Only those this job produced"),
]
IS_READ = OpenApiParameter("isRead", bool, description="true: only read notices; false: only unread ones")


def _query(request: Request) -> dict[str, Any]:
    # A plain dict: DRF reads a boolean missing from a QueryDict as false.
    return request.query_params.dict()


class UserView(GenericAPIView):
    throttle_classes = [UserThrottle]


class OutputListView(UserView):
    """The user's outputs of one model, newest first, paginated and filtered."""

    model: ClassVar[type[Model]]
    serializer_class: ClassVar[type[serializers.Serializer]]

    def get(self, request: Request) -> Response:
        filters = s.filters_of(s.OutputFilterSerializer, _query(request))
        page = self.paginate_queryset(selectors.job_linked(model=self.model, user=request.user, **filters))
        return self.get_paginated_response(self.serializer_class(page, many=True).data)


def output_list_view(output: OutputList) -> type[OutputListView]:
    """The view of one output list, with its own schema (its serializer, its description)."""
    serializer_class = s.SERIALIZERS[output.model]
    view = type(
        f"{output.model.__name__}ListView",
        (OutputListView,),
        {"model": output.model, "serializer_class": serializer_class, "__module__": __name__},
    )
    schema = extend_schema(
        tags=["ai results"],
        responses=serializer_class(many=True),
        parameters=FILTERS,
        description=output.description,
    )
    return extend_schema_view(get=schema)(view)


class NotificationListView(UserView):
    serializer_class = s.NotificationSerializer

    @extend_schema(
        tags=["ai notifications"],
        responses={200: s.NotificationSerializer(many=True), 304: NOT_MODIFIED},
        parameters=[*FILTERS, IS_READ, IF_NONE_MATCH],
        description="Notices that the user's jobs finished (succeeded, or failed for good), newest first. "
        "Answered with an ETag: the same request with If-None-Match naming it answers 304 until a notice "
        "is added, read or removed.",
    )
    def get(self, request: Request) -> Response:
        filters = s.filters_of(s.NotificationFilterSerializer, _query(request))
        page = self.paginate_queryset(notifications.notification_list(user=request.user, **filters))
        return conditional(request, self.get_paginated_response(s.NotificationSerializer(page, many=True).data))


class NotificationReadView(UserView):
    serializer_class = s.NotificationSerializer
    pagination_class = None

    @extend_schema(
        tags=["ai notifications"],
        request=None,
        responses=s.NotificationSerializer,
        description="Mark a notice read; again is harmless and keeps the first readAt.",
    )
    def post(self, request: Request, notification_id: str) -> Response:
        notification = notifications.notification_mark_read(user=request.user, notification_id=notification_id)
        return Response(s.NotificationSerializer(notification).data)
