"""``/healthz``, ``/readyz`` and ``/metrics``. Thin: each asks
``ops.health`` or ``ops.metrics`` and renders."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from rest_framework import exceptions, serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import ErrorCode
from ops import health, metrics


class OpsView(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes: list[type] = []


_STATUS = inline_serializer("HealthStatus", {"status": serializers.ChoiceField(choices=["ok"])})
_READINESS = inline_serializer(
    "Readiness",
    {
        "status": serializers.ChoiceField(choices=["ok", "unavailable"]),
        "checks": serializers.DictField(
            child=serializers.ChoiceField(choices=["ok", "unavailable"]),
            help_text="Per configured service (database, redis, broker); what failed is in the log, not here",
        ),
    },
)


@extend_schema(tags=["operations"], responses={200: _STATUS}, summary="Liveness: touches no backing service")
class HealthzView(OpsView):
    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})


@extend_schema(
    tags=["operations"],
    responses={200: _READINESS, 503: _READINESS},
    summary="Readiness: the database, Redis and the broker, each that is configured",
)
class ReadyzView(OpsView):
    def get(self, request: Request) -> Response:
        checks = health.readiness_checks()
        ok = all(value == "ok" for value in checks.values())
        return Response({"status": "ok" if ok else "unavailable", "checks": checks}, status=200 if ok else 503)


@extend_schema(
    tags=["operations"],
    responses={
        (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="Prometheus text format"),
    },
    summary="Prometheus metrics; a bearer token when METRICS_TOKEN is set",
)
class MetricsView(OpsView):
    error_codes = (ErrorCode.UNAUTHORIZED,)  # METRICS_TOKEN is set and the bearer token is missing or wrong

    def get(self, request: Request) -> HttpResponse:
        expected = settings.METRICS_TOKEN
        if expected:
            scheme, _, given = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected.encode()):
                raise exceptions.NotAuthenticated("GET /metrics needs Authorization: Bearer <METRICS_TOKEN>")
        response = HttpResponse(metrics.render(), content_type=CONTENT_TYPE_LATEST)
        response["Cache-Control"] = "no-store"
        return response
