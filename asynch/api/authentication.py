"""How a business service authenticates to model-asynch:
``X-Api-Key: <key>``, stored hashed, each key a tenant's. Model configuration also
admits a staff user's JWT, when that user may change model configs in Django admin."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from asynch import services
from asynch.models import Tenant
from config import auth_failures

API_KEY_HEADER = "X-Api-Key"
# Django's permission to change model configs: what a staff user needs in admin to do
# what the model configuration endpoints do.
CHANGE_MODELS_PERMISSION = "asynch.change_asynchmodel"
# And to view the statistics of every tenant, as the admin's statistics page does.
VIEW_STATS_PERMISSION = "asynch.view_asynchmodelstat"


@dataclass(frozen=True)
class TenantPrincipal:
    """The authenticated caller: a tenant's service, not a user."""

    tenant: Tenant
    is_authenticated: bool = True
    pk: None = None
    is_staff: bool = False


class TenantApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[TenantPrincipal, str] | None:
        key = request.headers.get(API_KEY_HEADER, "").strip()
        if not key:
            return None
        auth_failures.refuse_if_blocked(request)  # a guesser's address, the right key included
        digest = services.hash_api_key(key)
        found = services.tenant_key_find(key_hash=digest)
        # The lookup is by hash; comparing again, constant-time, leaves no timing to learn a key from.
        if found is None or not hmac.compare_digest(found.key_hash, digest):
            auth_failures.failed(request)
            raise exceptions.AuthenticationFailed("Invalid API key")
        return TenantPrincipal(tenant=found.tenant), found.id

    def authenticate_header(self, request: Request) -> str:
        return 'ApiKey realm="asynch"'


def tenant_of(request: Request) -> Tenant | None:
    return request.user.tenant if isinstance(request.user, TenantPrincipal) else None


class IsTenant(BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.user, TenantPrincipal)


def may_change_models(user: Any) -> bool:
    """An admin tenant, or a staff user with the permission to change model configs
    (a superuser has it): a staff flag alone is not enough."""
    if isinstance(user, TenantPrincipal):
        return user.tenant.is_admin
    return bool(
        user is not None and user.is_authenticated and user.is_staff and user.has_perm(CHANGE_MODELS_PERMISSION)
    )


class IsModelAdmin(BasePermission):
    """An admin tenant's key, or the JWT of a staff user who may change model configs."""

    message = "Model configs need an admin tenant's key, or the JWT of a staff user who may change model configs."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return may_change_models(request.user)


class IsTenantOrStaff(BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        return isinstance(user, TenantPrincipal) or bool(user is not None and user.is_authenticated and user.is_staff)


class IsTenantOrStatsViewer(BasePermission):
    """A tenant's key, or the JWT of a staff user who may view every tenant's
    statistics in Django admin: a staff flag alone is refused."""

    message = "Statistics need a tenant's key, or the JWT of a staff user who may view model statistics."

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        if isinstance(user, TenantPrincipal):
            return True
        return bool(
            user is not None and user.is_authenticated and user.is_staff and user.has_perm(VIEW_STATS_PERMISSION)
        )


class TenantApiKeyScheme(OpenApiAuthenticationExtension):
    """The ``X-Api-Key`` header in the OpenAPI schema."""

    target_class = TenantApiKeyAuthentication
    name = "TenantApiKey"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        return {"type": "apiKey", "in": "header", "name": API_KEY_HEADER}
