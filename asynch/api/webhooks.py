"""``/webhook/*``: a tenant's webhook endpoints and their deliveries (contract section
11.3), with the model-asynch API's authentication (``X-Api-Key``). A tenant sees and
changes only its own: another's ``endpointId`` or ``deliveryId`` is ``404``. Thin:
parse, call one service of ``delivery``, render."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from asynch.api.authentication import IsTenant, TenantApiKeyAuthentication, tenant_of
from config import outbound
from config.errors import ErrorCode
from config.pagination import PAGE_PARAMETERS, ContractCursorPagination, page_of
from delivery import selectors
from delivery.models import Delivery, DeliveryStatus, WebhookEndpoint
from delivery.services import webhooks

TAGS = ["webhooks"]


def _check_url(value: str) -> str:
    try:
        outbound.read(value)  # the one reading of a URL; the address rules are the service's
    except outbound.OutboundRefused as refused:
        raise serializers.ValidationError(str(refused)) from None
    return value


class _EventsField(serializers.ListField):
    child = serializers.ChoiceField(choices=webhooks.EVENTS)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_empty=False, max_length=len(webhooks.EVENTS) * 2, **kwargs)


class EndpointCreateInSerializer(serializers.Serializer):
    url = serializers.CharField(max_length=outbound.MAX_URL_LENGTH, trim_whitespace=False, validators=[_check_url])
    events = _EventsField(required=False, help_text="A subset of task.succeeded, task.failed (default both)")
    description = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class EndpointIdSerializer(serializers.Serializer):
    endpointId = serializers.CharField(max_length=64)


class EndpointUpdateInSerializer(EndpointIdSerializer):
    """A partial update: only the fields sent change."""

    url = serializers.CharField(
        max_length=outbound.MAX_URL_LENGTH, trim_whitespace=False, validators=[_check_url], required=False
    )
    events = _EventsField(required=False)
    description = serializers.CharField(max_length=500, required=False, allow_blank=True)
    enabled = serializers.BooleanField(required=False, help_text="true turns a disabled endpoint back on")


class EndpointSerializer(serializers.Serializer):
    endpointId = serializers.CharField(source="id")
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.ChoiceField(choices=webhooks.EVENTS))
    description = serializers.CharField()
    enabled = serializers.BooleanField()
    createdAt = serializers.DateTimeField(source="created_at")


class EndpointCreatedSerializer(EndpointSerializer):
    secret = serializers.CharField(help_text="whsec_ + base64 of the key: shown here once")


class SecretSerializer(serializers.Serializer):
    endpointId = serializers.CharField()
    secret = serializers.CharField(help_text="The new secret: shown here once")


class EndpointDeletedSerializer(serializers.Serializer):
    endpointId = serializers.CharField()
    deleted = serializers.BooleanField()


class DeliveriesQuerySerializer(serializers.Serializer):
    endpointId = serializers.CharField(max_length=64, required=False, allow_blank=True)
    status = serializers.ChoiceField(choices=list(selectors.WIRE_STATUSES), required=False, allow_blank=True)


class DeliverySerializer(serializers.Serializer):
    deliveryId = serializers.CharField(source="id")
    eventId = serializers.CharField(source="event_id", help_text="The webhook-id of every try")
    eventType = serializers.SerializerMethodField()
    taskId = serializers.SerializerMethodField()
    status = serializers.SerializerMethodField()
    attempts = serializers.IntegerField()
    lastStatusCode = serializers.IntegerField(source="last_status_code", allow_null=True)
    lastError = serializers.CharField(source="last_error")
    nextAttemptAt = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at")
    deliveredAt = serializers.SerializerMethodField()

    @extend_schema_field({"type": "string", "enum": list(webhooks.EVENTS)})
    def get_eventType(self, delivery: Delivery) -> str:
        return str(delivery.payload.get("eventType", ""))

    def get_taskId(self, delivery: Delivery) -> str:
        return str(delivery.payload.get("about", ""))

    @extend_schema_field({"type": "string", "enum": list(selectors.WIRE_STATUSES)})
    def get_status(self, delivery: Delivery) -> str:
        return selectors.wire_status(delivery.status)

    @extend_schema_field({"type": "string", "format": "date-time", "nullable": True})
    def get_nextAttemptAt(self, delivery: Delivery) -> str | None:
        if delivery.status != DeliveryStatus.PENDING or delivery.next_attempt_at is None:
            return None
        return serializers.DateTimeField().to_representation(delivery.next_attempt_at)

    @extend_schema_field({"type": "string", "format": "date-time", "nullable": True})
    def get_deliveredAt(self, delivery: Delivery) -> str | None:
        if delivery.status != DeliveryStatus.DELIVERED or delivery.finished_at is None:
            return None
        return serializers.DateTimeField().to_representation(delivery.finished_at)


class DeliveryIdSerializer(serializers.Serializer):
    deliveryId = serializers.CharField(max_length=64)


class ReplayedSerializer(serializers.Serializer):
    deliveryId = serializers.CharField()
    eventId = serializers.CharField(help_text="The webhook-id it is sent with, as before")


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class WebhookView(APIView):
    authentication_classes = [TenantApiKeyAuthentication]
    permission_classes = [IsTenant]
    error_codes: tuple[ErrorCode, ...] = (ErrorCode.NOT_FOUND,)

    def owner(self, request: Request) -> str:
        tenant = tenant_of(request)
        assert tenant is not None  # IsTenant
        return tenant.id


def _endpoint(endpoint: WebhookEndpoint) -> dict[str, Any]:
    return EndpointSerializer(endpoint).data


@extend_schema(tags=TAGS, request=EndpointCreateInSerializer, responses={201: EndpointCreatedSerializer})
class EndpointCreateView(WebhookView):
    """A new endpoint; its signing secret is in this answer only."""

    error_codes = ()

    def post(self, request: Request) -> Response:
        data = _valid(EndpointCreateInSerializer, request.data)
        issued = webhooks.endpoint_create(
            owner_id=self.owner(request), url=data["url"], events=data.get("events"), description=data["description"]
        )
        return Response({**_endpoint(issued.endpoint), "secret": issued.secret}, status=status.HTTP_201_CREATED)


class _EndpointPages(ContractCursorPagination):
    ordering = ("created_at", "id")


@extend_schema(tags=TAGS, parameters=PAGE_PARAMETERS, responses=page_of(EndpointSerializer))
class EndpointListView(WebhookView):
    """The tenant's webhook endpoints, oldest first, paginated; never their secrets."""

    error_codes = ()

    def get(self, request: Request) -> Response:
        paginator = _EndpointPages()
        page = paginator.paginate_queryset(selectors.endpoints_list(owner_id=self.owner(request)), request, view=self)
        return paginator.get_paginated_response(EndpointSerializer(page, many=True).data)


@extend_schema(tags=TAGS, request=EndpointUpdateInSerializer, responses=EndpointSerializer)
class EndpointUpdateView(WebhookView):
    """Change one of the tenant's endpoints: only the fields sent change. A new `url` is
    checked by the outbound rules as at creation; `enabled: true` turns a disabled endpoint
    back on and forgets its failures. Another tenant's `endpointId` answers as a missing one."""

    def post(self, request: Request) -> Response:
        data = _valid(EndpointUpdateInSerializer, request.data)
        endpoint = webhooks.endpoint_update(
            owner_id=self.owner(request),
            endpoint_id=data["endpointId"],
            url=data.get("url"),
            events=data.get("events"),
            description=data.get("description"),
            enabled=data.get("enabled"),
        )
        return Response(_endpoint(endpoint))


@extend_schema(tags=TAGS, request=EndpointIdSerializer, responses=EndpointDeletedSerializer)
class EndpointDeleteView(WebhookView):
    """Delete one of the tenant's endpoints; what was not yet sent to it is dropped.
    Another tenant's `endpointId` answers as a missing one."""

    def post(self, request: Request) -> Response:
        endpoint_id = _valid(EndpointIdSerializer, request.data)["endpointId"]
        webhooks.endpoint_delete(owner_id=self.owner(request), endpoint_id=endpoint_id)
        return Response({"endpointId": endpoint_id, "deleted": True})


@extend_schema(tags=TAGS, request=EndpointIdSerializer, responses=SecretSerializer)
class RotateSecretView(WebhookView):
    """A new secret. For ``WEBHOOK_SECRET_OVERLAP_SECONDS`` every try is signed with
    the new secret and the old one."""

    def post(self, request: Request) -> Response:
        endpoint_id = _valid(EndpointIdSerializer, request.data)["endpointId"]
        issued = webhooks.endpoint_rotate_secret(owner_id=self.owner(request), endpoint_id=endpoint_id)
        return Response({"endpointId": issued.endpoint.id, "secret": issued.secret})


class _DeliveryPages(ContractCursorPagination):
    ordering = ("-created_at", "-id")


@extend_schema(
    tags=TAGS,
    parameters=[
        OpenApiParameter("endpointId", str, required=False),
        OpenApiParameter("status", str, required=False, enum=list(selectors.WIRE_STATUSES)),
        *PAGE_PARAMETERS,
    ],
    responses=page_of(DeliverySerializer),
)
class DeliveryListView(WebhookView):
    """Recent deliveries, newest first, of every endpoint of the tenant or of one
    (`endpointId`), in one status or all. An `endpointId` that is not the tenant's answers
    as a missing one."""

    def get(self, request: Request) -> Response:
        query = _valid(DeliveriesQuerySerializer, request.query_params)
        if query.get("endpointId"):
            webhooks.endpoint_get(owner_id=self.owner(request), endpoint_id=query["endpointId"])
        rows = selectors.webhook_deliveries_list(
            owner_id=self.owner(request), endpoint_id=query.get("endpointId"), status=query.get("status")
        )
        paginator = _DeliveryPages()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(DeliverySerializer(page, many=True).data)


@extend_schema(tags=TAGS, request=DeliveryIdSerializer, responses={202: ReplayedSerializer})
class ReplayView(WebhookView):
    """Sent again, with its original ``webhook-id``."""

    def post(self, request: Request) -> Response:
        delivery_id = _valid(DeliveryIdSerializer, request.data)["deliveryId"]
        delivery = webhooks.webhook_replay(owner_id=self.owner(request), delivery_id=delivery_id)
        return Response({"deliveryId": delivery.id, "eventId": delivery.event_id}, status=status.HTTP_202_ACCEPTED)
