"""/ai/analyses, /ai/weak-points, /ai/recommendations, /ai/quizzes, /ai/flashcards
and /ai/notifications (contract §4). Thin: parse the filters, call one selector or
service, serialize. Every read is the signed-in user's own; another user's
notification answers 404 exactly as a missing one."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db.models import Model
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from ai_jobs import notifications, records
from ai_jobs.api import record_serializers as s
from ai_jobs.models import (
    AiLearningAnalysis,
    Flashcard,
    NextActionRecommendation,
    QuizQuestion,
    TargetType,
    WeakPointCandidate,
)
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


class _RecordListView(UserView):
    """The user's records of one kind, newest first, paginated and filtered."""

    model: ClassVar[type[Model]]
    serializer_class: ClassVar[type[serializers.Serializer]]

    def get(self, request: Request) -> Response:
        filters = s.filters_of(s.RecordFilterSerializer, _query(request))
        page = self.paginate_queryset(records.record_list(model=self.model, user=request.user, **filters))
        return self.get_paginated_response(self.serializer_class(page, many=True).data)


def _list_schema(serializer_class: type[serializers.Serializer], description: str) -> Any:
    return extend_schema(
        tags=["ai results"], responses=serializer_class(many=True), parameters=FILTERS, description=description
    )


class AnalysisListView(_RecordListView):
    model = AiLearningAnalysis
    serializer_class = s.AnalysisSerializer

    @_list_schema(s.AnalysisSerializer, "Learning state analyses (one per learning_state_analysis job).")
    def get(self, request: Request) -> Response:
        return super().get(request)


class WeakPointListView(_RecordListView):
    model = WeakPointCandidate
    serializer_class = s.WeakPointSerializer

    @_list_schema(s.WeakPointSerializer, "Weak-point candidates (one per entry of a weak_point_analysis output).")
    def get(self, request: Request) -> Response:
        return super().get(request)


class RecommendationListView(_RecordListView):
    model = NextActionRecommendation
    serializer_class = s.RecommendationSerializer

    @_list_schema(
        s.RecommendationSerializer, "Next-action recommendations (one per entry of a next_action_planning output)."
    )
    def get(self, request: Request) -> Response:
        return super().get(request)


class QuizListView(_RecordListView):
    model = QuizQuestion
    serializer_class = s.QuizQuestionSerializer

    @_list_schema(
        s.QuizQuestionSerializer,
        "Published quiz questions of the user's knowledge bases. A question is listed under the job that "
        "published it; a later job's duplicate of it publishes nothing.",
    )
    def get(self, request: Request) -> Response:
        return super().get(request)


class FlashcardListView(_RecordListView):
    model = Flashcard
    serializer_class = s.FlashcardSerializer

    @_list_schema(
        s.FlashcardSerializer,
        "Published flashcards of the user's knowledge bases, listed under the job that published each.",
    )
    def get(self, request: Request) -> Response:
        return super().get(request)


class NotificationListView(UserView):
    serializer_class = s.NotificationSerializer

    @extend_schema(
        tags=["ai notifications"],
        responses=s.NotificationSerializer(many=True),
        parameters=[*FILTERS, IS_READ],
        description="Notices that the user's jobs finished (succeeded, or failed for good), newest first.",
    )
    def get(self, request: Request) -> Response:
        filters = s.filters_of(s.NotificationFilterSerializer, _query(request))
        page = self.paginate_queryset(notifications.notification_list(user=request.user, **filters))
        return self.get_paginated_response(s.NotificationSerializer(page, many=True).data)


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
