"""The user's jobs and learning profile under /ai/. Thin: parse,
call one service, render."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ai_jobs import selectors, services
from ai_jobs.api.internal_serializers import render
from ai_jobs.api.user_serializers import (
    JobCreateSerializer,
    JobListQuerySerializer,
    UserJobSerializer,
    job_create_parse,
)
from config.errors import ErrorCode
from config.etag import IF_NONE_MATCH, NOT_MODIFIED, conditional
from config.openapi import raises
from config.pagination import PAGE_PARAMETERS, ContractCursorPagination, page_of
from learning import selectors as learning_selectors
from learning import services as learning_services
from learning.api.serializers import LearningProfileInSerializer, LearningProfileSerializer
from quotas.throttles import UserThrottle

# The body of seed 002's section 4.2, as written: the request example of POST /ai/jobs.
SEED_JOB = {
    "jobType": "quiz_generation",
    "targetType": "knowledge_base",
    "targetId": "kb-001",
    "apiKeyMode": "platform_key",
    "idempotencyKey": "client-uuid-xxx",
    "questionCount": 10,
}


class UserView(APIView):
    throttle_classes = [UserThrottle]


@extend_schema(tags=["ai jobs"])
class JobListView(UserView):
    @extend_schema(
        parameters=[JobListQuerySerializer, *PAGE_PARAMETERS],
        responses=page_of(UserJobSerializer),
        operation_id="ai_jobs_list",
    )
    def get(self, request: Request) -> Response:
        """List the caller's jobs, newest first, filtered by `status` and `jobType`."""
        query = JobListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        jobs = selectors.user_jobs(
            user=request.user, status=query.validated_data.get("status"), job_type=query.validated_data.get("jobType")
        )
        paginator = ContractCursorPagination()
        page = paginator.paginate_queryset(jobs, request, view=self)
        return paginator.get_paginated_response(UserJobSerializer(page, many=True).data)

    @extend_schema(
        request=JobCreateSerializer,
        responses={201: UserJobSerializer, 200: UserJobSerializer},
        examples=[OpenApiExample("A quiz of a knowledge base (seed 002, 4.2)", value=SEED_JOB, request_only=True)],
    )
    @raises(
        ErrorCode.INVALID_JOB_TYPE,
        ErrorCode.INVALID_TARGET_TYPE,
        ErrorCode.NOT_FOUND,
        ErrorCode.AI_ANALYSIS_DISABLED,
        ErrorCode.CREDENTIAL_REQUIRED,
        ErrorCode.CREDENTIAL_NOT_FOUND,
        ErrorCode.DAILY_JOB_LIMIT_EXCEEDED,
        ErrorCode.DAILY_TOKEN_BUDGET_EXCEEDED,
        ErrorCode.PLATFORM_CIRCUIT_OPEN,
        ErrorCode.PLATFORM_CIRCUIT_HALF_OPEN,
        ErrorCode.PLATFORM_TOKEN_BUDGET_EXCEEDED,
        ErrorCode.PLATFORM_COST_BUDGET_EXCEEDED,
    )
    def post(self, request: Request) -> Response:
        """Create a job: ask for AI work on the caller's learning data.

        The answer is `201` with the new job, `pending`; a runtime picks it up and the job ends
        `succeeded` (its outputs appear under `/ai/analyses`, `/ai/quizzes`, ...), `failed`,
        `cancelled` or `expired`. Poll `GET /ai/jobs/{job_id}` (or read `/ai/notifications`)
        to learn the end. The same `idempotencyKey` again answers `200` with the job it made.
        The checks run in this order: the job type and its target, the learner's consent, the
        credential, the learner's day, the platform's breaker and budget."""
        data = job_create_parse(request.data)
        submitted = services.job_submit(
            user=request.user,
            job_type=data["jobType"],
            target_type=data["targetType"],
            target_id=data["targetId"],
            api_key_mode=data.get("apiKeyMode"),
            credential_id=data.get("credentialId") or None,
            idempotency_key=data.get("idempotencyKey") or None,
            priority=data["priority"],
            params=data["params"],
        )
        return Response(
            render(UserJobSerializer, submitted.job),
            status=status.HTTP_201_CREATED if submitted.created else status.HTTP_200_OK,
        )


@extend_schema(tags=["ai jobs"], responses=UserJobSerializer)
class JobDetailView(UserView):
    @extend_schema(responses={200: UserJobSerializer, 304: NOT_MODIFIED}, parameters=[IF_NONE_MATCH])
    @raises(ErrorCode.JOB_NOT_FOUND)
    def get(self, request: Request, job_id: str) -> Response:
        """Read one of the caller's jobs: poll it until `finishedAt` is set."""
        job = selectors.user_job(user=request.user, job_id=job_id)
        return conditional(request, Response(render(UserJobSerializer, job)))


@extend_schema(tags=["ai jobs"], request=None, responses=UserJobSerializer)
class JobCancelView(UserView):
    @raises(ErrorCode.JOB_NOT_FOUND, ErrorCode.JOB_NOT_ACTIVE)
    def post(self, request: Request, job_id: str) -> Response:
        """Cancel one of the caller's jobs: a pending one ends `cancelled` at once, a running one
        when its runtime next checks in (`cancelRequested` is true until then)."""
        job = selectors.user_job(user=request.user, job_id=job_id)
        return Response(render(UserJobSerializer, services.job_cancel(job_id=job.id, reason="Cancelled by the user")))


@extend_schema(tags=["ai"])
class LearningProfileView(UserView):
    @extend_schema(responses=LearningProfileSerializer)
    def get(self, request: Request) -> Response:
        """Read the caller's learning profile (goals, level, preferences) that analyses use."""
        return Response(learning_selectors.learning_profile_data(user=request.user))

    @extend_schema(request=LearningProfileInSerializer, responses=LearningProfileSerializer)
    def put(self, request: Request) -> Response:
        """Replace the caller's learning profile."""
        serializer = LearningProfileInSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        learning_services.learning_profile_update(
            user=request.user,
            goals=data["goals"],
            level=data["level"],
            preferred_study_time=data["preferredStudyTime"],
            preferences=data["preferences"],
        )
        return Response(learning_selectors.learning_profile_data(user=request.user))

    @extend_schema(responses={204: None})
    def delete(self, request: Request) -> Response:
        """Delete the caller's learning profile; reading it again gives an empty one."""
        learning_services.learning_profile_delete(user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
