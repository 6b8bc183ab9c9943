"""The user's model credentials. Thin: parse, call one service, render.

The request body carries a clear key, so the methods that read it are
``sensitive_variables``: an exception report shows stars for their locals."""

from __future__ import annotations

from typing import Any

from django.views.decorators.debug import sensitive_variables
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import DomainError, ErrorCode
from config.pagination import PAGE_PARAMETERS, ContractCursorPagination
from credentials import selectors, services
from credentials.api import serializers as s
from credentials.models import Credential
from quotas.throttles import CredentialTestThrottle, UserThrottle

ModelCredentialPage = inline_serializer(
    "ModelCredentialPage",
    {"results": s.ModelCredentialSerializer(many=True), "next": serializers.CharField(allow_null=True)},
)


def _valid(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _own(request: Request, credential_id: str) -> Credential:
    credential = selectors.credential_get_for_user(user=request.user, credential_id=credential_id)
    if credential is None:  # missing, deleted or another user's: the same answer
        raise DomainError(ErrorCode.CREDENTIAL_NOT_FOUND, "Credential not found")
    return credential


class UserView(APIView):
    throttle_classes = [UserThrottle]


@extend_schema(tags=["model credentials"])
class CredentialListView(UserView):
    @extend_schema(responses=ModelCredentialPage, parameters=PAGE_PARAMETERS, operation_id="ai_model_credentials_list")
    def get(self, request: Request) -> Response:
        """List the caller's own model credentials (their keys masked)."""
        paginator = ContractCursorPagination()
        page = paginator.paginate_queryset(selectors.credentials_of_user(user=request.user), request, view=self)
        return paginator.get_paginated_response(s.ModelCredentialSerializer(page, many=True).data)

    @extend_schema(request=s.ModelCredentialCreateSerializer, responses={201: s.ModelCredentialSerializer})
    @sensitive_variables()
    def post(self, request: Request) -> Response:
        """Store a model key of the caller's own (encrypted at rest), for `user_deepseek_key` jobs."""
        data = _valid(s.ModelCredentialCreateSerializer, request)
        credential = services.credential_create(
            user=request.user, name=data["name"], provider=data["provider"], api_key=data["apiKey"]
        )
        return Response(s.ModelCredentialSerializer(credential).data, status=status.HTTP_201_CREATED)


@extend_schema(tags=["model credentials"])
class CredentialDetailView(UserView):
    error_codes = (ErrorCode.CREDENTIAL_NOT_FOUND,)

    @extend_schema(responses=s.ModelCredentialSerializer)
    def get(self, request: Request, credential_id: str) -> Response:
        """Read one of the caller's credentials (its key masked)."""
        return Response(s.ModelCredentialSerializer(_own(request, credential_id)).data)

    @extend_schema(request=s.ModelCredentialUpdateSerializer, responses=s.ModelCredentialSerializer)
    @sensitive_variables()
    def put(self, request: Request, credential_id: str) -> Response:
        """Rename a credential or replace its key."""
        credential = _own(request, credential_id)
        data = _valid(s.ModelCredentialUpdateSerializer, request)
        credential = services.credential_update(
            credential=credential, name=data.get("name"), api_key=data.get("apiKey")
        )
        return Response(s.ModelCredentialSerializer(credential).data)

    @extend_schema(request=s.ModelCredentialUpdateSerializer, responses=s.ModelCredentialSerializer)
    def patch(self, request: Request, credential_id: str) -> Response:
        """Rename a credential or replace its key (the fields sent only)."""
        return self.put(request, credential_id)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, credential_id: str) -> Response:
        """Delete a credential: jobs that would run with it can no longer resolve it."""
        services.credential_delete(credential=_own(request, credential_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["model credentials"])
class CredentialTestView(UserView):
    error_codes = (ErrorCode.CREDENTIAL_NOT_FOUND, ErrorCode.CREDENTIAL_RESOLVE_FAILED)
    throttle_classes = [UserThrottle, CredentialTestThrottle]

    @extend_schema(request=None, responses=s.ModelCredentialTestSerializer)
    def post(self, request: Request, credential_id: str) -> Response:
        """Test a credential with one small call to its provider; the outcome is kept as its last test."""
        outcome = services.credential_test(credential=_own(request, credential_id))
        return Response(s.ModelCredentialTestSerializer(outcome).data)
