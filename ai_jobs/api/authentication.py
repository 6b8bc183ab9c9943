"""How a runtime authenticates: ``Authorization: Bearer <token>`` or
``x-internal-api-key: <token>``, against ``RUNTIME_SERVICE_TOKENS``. A wrong token
counts against the client address (``config.auth_failures``)."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from config import auth_failures

INSTANCE_HEADER = "x-runtime-instance-id"


@dataclass(frozen=True)
class RuntimePrincipal:
    """The authenticated caller of the internal API: a runtime, not a user."""

    instance_id: str | None
    is_authenticated: bool = True
    pk: None = None

    @property
    def is_staff(self) -> bool:
        return False


def _token_of(request: Request) -> str | None:
    token = request.headers.get("x-internal-api-key")
    if token:
        return token.strip()
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None


def _known(token: str) -> bool:
    # Compare against every token, constant-time each, so timing says nothing.
    found = False
    for candidate in settings.RUNTIME_SERVICE_TOKENS:
        found |= hmac.compare_digest(token.encode(), candidate.encode())
    return found


class RuntimeAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[RuntimePrincipal, str] | None:
        token = _token_of(request)
        if token is None:
            return None
        if not _known(token):
            auth_failures.refuse_if_blocked(request)
            auth_failures.failed(request)
            raise exceptions.AuthenticationFailed("Invalid runtime service token")
        # A right token from an address blocked for guessing is refused too, by the
        # view's RuntimeThrottle, which reads the block in the round trip it makes anyway.
        return RuntimePrincipal(instance_id=request.headers.get(INSTANCE_HEADER) or None), token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="runtime"'


class IsRuntime(BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.user, RuntimePrincipal)


def instance_id_of(request: Request) -> str:
    """The caller's ``x-runtime-instance-id``; every call that acts on a job sends one."""
    instance_id = request.headers.get(INSTANCE_HEADER, "").strip()
    if not instance_id or len(instance_id) > 128:
        raise exceptions.ValidationError({INSTANCE_HEADER: ["This header is required: 1 to 128 characters."]})
    return instance_id


class RuntimeAuthenticationScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema describes a runtime's credentials."""

    target_class = RuntimeAuthentication
    name = ["runtimeBearer", "runtimeApiKey"]

    def get_security_requirement(self, auto_schema: object) -> list[dict[str, list[str]]]:
        # Either scheme, not both: one requirement naming the two would demand both headers.
        return [{name: []} for name in self.name]

    def get_security_definition(self, auto_schema: object) -> list[dict[str, str]]:
        return [
            {"type": "http", "scheme": "bearer", "description": "A token of RUNTIME_SERVICE_TOKENS"},
            {"type": "apiKey", "in": "header", "name": "x-internal-api-key"},
        ]
