"""The caller's devices under /ai/ (contract 11.1). Thin: parse, call one service, render."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import ErrorCode
from config.pagination import PAGE_PARAMETERS, ContractCursorPagination
from delivery.api import serializers as s
from delivery.services import devices
from quotas.throttles import UserThrottle

DevicePage = inline_serializer(
    "DevicePage",
    {
        "results": s.DeviceSerializer(many=True),
        "next": serializers.CharField(allow_null=True, help_text="The cursor of the next page; null on the last"),
    },
)


class DevicePagination(ContractCursorPagination):
    ordering = ("-created_at", "-id")


class UserView(APIView):
    throttle_classes = [UserThrottle]


@extend_schema(tags=["devices"])
class DeviceListView(UserView):
    @extend_schema(
        summary="List the caller's devices",
        description="The devices the caller registered for pushes, newest first, paginated. Tokens are never "
        "returned, only their last 6 characters.",
        responses=DevicePage,
        parameters=PAGE_PARAMETERS,
        operation_id="ai_devices_list",
    )
    def get(self, request: Request) -> Response:
        paginator = DevicePagination()
        page = paginator.paginate_queryset(devices.device_list(user_id=request.user.pk), request, view=self)
        return paginator.get_paginated_response(s.DeviceSerializer(page, many=True).data)

    @extend_schema(
        summary="Register a device for pushes",
        description="Registers the phone's APNs (ios) or FCM (android) token with its locale. A new token answers "
        "201; a token already registered answers 200 and is that device: its locale and app version updated, "
        "moved to the caller if another user registered it, enabled again if it was disabled. A user holds at "
        "most PUSH_MAX_DEVICES_PER_USER devices: one more drops the one registered longest ago. A token that "
        "breaks its platform's rules is 400 VALIDATION_ERROR on token.",
        request=s.DeviceRegisterSerializer,
        responses={201: s.DeviceSerializer, 200: s.DeviceSerializer},
        operation_id="ai_devices_create",
    )
    def post(self, request: Request) -> Response:
        body = s.DeviceRegisterSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        device, created = devices.device_register(
            user_id=request.user.pk, platform=data["platform"], token=data["token"],
            locale=data.get("locale"), app_version=data.get("appVersion"),
        )  # fmt: skip
        return Response(
            s.DeviceSerializer(device).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


@extend_schema(tags=["devices"])
class DeviceDetailView(UserView):
    error_codes = (ErrorCode.NOT_FOUND,)

    @extend_schema(
        summary="Delete a device",
        description="Nothing more is sent to it, including pushes not yet sent. Another user's device is 404, "
        "as a missing one.",
        responses={204: None},
    )
    def delete(self, request: Request, device_id: str) -> Response:
        devices.device_delete(user_id=request.user.pk, device_id=device_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
