"""``/auth/*``: tokens, their rotation, logout, a password change,
and registration. Each is throttled per pair of username (or user) and client IP by
``AUTH_THROTTLE_RATE`` and per client IP by ``AUTH_ADDRESS_THROTTLE_RATE``;
registration also per client IP by ``REGISTRATION_THROTTLE_RATE``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework_simplejwt import views as jwt_views
from rest_framework_simplejwt.exceptions import TokenError
from rest_framework_simplejwt.settings import api_settings
from rest_framework_simplejwt.tokens import UntypedToken

from accounts import selectors, services
from accounts.api import serializers as s
from accounts.api.tokens import TokenObtainSerializer, token_pair
from config.errors import DomainError, ErrorCode
from config.openapi import raises
from quotas.throttles import AuthIpThrottle, AuthUsernameThrottle, RegistrationIpThrottle

THROTTLES = [AuthIpThrottle, AuthUsernameThrottle]


def _body_field(request: Request, name: str) -> str | None:
    data = request.data
    value = data.get(name) if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else None


class _ByRefreshToken:
    """The per-user throttle of a call that names its user by a refresh token: its
    user, when its signature holds (a forged one counts per IP only)."""

    def throttle_user(self, request: Request) -> str | None:
        token = _body_field(request, "refresh")
        if token is None:
            return None
        try:
            return str(UntypedToken(token)[api_settings.USER_ID_CLAIM])
        except (TokenError, KeyError):
            return None


@extend_schema(tags=["auth"], request=TokenObtainSerializer, responses=s.TokenPairSerializer)
class TokenView(jwt_views.TokenObtainPairView):
    """Log in: a username and password for a JWT pair.

    ``{"username", "password"}`` → ``{"access", "refresh"}``; the username in any
    case or spelling that normalizes to the account's."""

    serializer_class = TokenObtainSerializer
    throttle_classes = THROTTLES

    def throttle_username(self, request: Request) -> str | None:
        return _body_field(request, "username")

    @raises(ErrorCode.UNAUTHORIZED)
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().post(request, *args, **kwargs)


@extend_schema(tags=["auth"], request=s.RefreshInSerializer, responses=s.RotatedSerializer)
class TokenRefreshView(_ByRefreshToken, APIView):
    """Refresh: a refresh token for a new JWT pair.

    ``{"refresh"}`` → ``{"access", "refresh"}``: the refresh token rotates, the one
    sent can never be used again (``401``), nor can one whose user changed password,
    was deactivated or deleted."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes = THROTTLES

    @raises(ErrorCode.UNAUTHORIZED)
    def post(self, request: Request) -> Response:
        serializer = s.RefreshInSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        pair = services.session_refresh(refresh=serializer.validated_data["refresh"])
        return Response(s.RotatedSerializer(pair).data)


@extend_schema(tags=["auth"], request=s.RefreshInSerializer, responses={204: None})
class LogoutView(_ByRefreshToken, APIView):
    """Log out: the refresh token sent can never be used again.

    ``{"refresh"}`` → ``204``: that refresh token is dead (``401`` if it was not a
    live one)."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes = THROTTLES

    @raises(ErrorCode.UNAUTHORIZED)
    def post(self, request: Request) -> Response:
        serializer = s.RefreshInSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.session_logout(refresh=serializer.validated_data["refresh"])
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["auth"], request=s.PasswordChangeInSerializer, responses={204: None})
class PasswordView(APIView):
    """Change the caller's password; every token issued before dies.

    ``{"oldPassword", "newPassword"}`` → ``204``, with the access token; Django's
    password validators apply. Every access and refresh token issued before answers
    ``401`` from then on."""

    throttle_classes = THROTTLES

    def throttle_user(self, request: Request) -> str | None:
        return selectors.public_id_of(request.user) if request.user is not None else None

    def post(self, request: Request) -> Response:
        serializer = s.PasswordChangeInSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.account_password_change(
            user=request.user,
            old_password=serializer.validated_data["oldPassword"],
            new_password=serializer.validated_data["newPassword"],
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["auth"], request=s.RegisterInSerializer, responses={201: s.RegisteredSerializer})
class RegisterView(APIView):
    """Register a learner's own account, logged in at once.

    ``{"username", "password", "email"?}`` → ``201 {"userId", "access", "refresh"}``;
    Django's password validators apply; a username taken in any case or spelling is ``400`` on ``username``;
    ``ALLOW_REGISTRATION`` off (the default) answers 403."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes = [*THROTTLES, RegistrationIpThrottle]

    def throttle_username(self, request: Request) -> str | None:
        return _body_field(request, "username")

    @raises(ErrorCode.FORBIDDEN)
    def post(self, request: Request) -> Response:
        if not settings.ALLOW_REGISTRATION:
            raise DomainError(ErrorCode.FORBIDDEN, "Registration is turned off on this server")
        serializer = s.RegisterInSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user = services.account_register(**serializer.validated_data)
        body = {"userId": selectors.public_id_of(user), **token_pair(user)}
        return Response(s.RegisteredSerializer(body).data, status=status.HTTP_201_CREATED)
