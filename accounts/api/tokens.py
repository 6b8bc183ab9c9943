"""JWTs that name their user by the public id (contract §2): the token a client
holds carries ``sub: "usr_…"``, never the database's integer key."""

from __future__ import annotations

import functools
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from drf_spectacular.contrib.rest_framework_simplejwt import SimpleJWTScheme
from rest_framework import exceptions
from rest_framework_simplejwt import serializers as jwt_serializers
from rest_framework_simplejwt import tokens
from rest_framework_simplejwt.authentication import JWTAuthentication
from rest_framework_simplejwt.exceptions import InvalidToken, TokenError
from rest_framework_simplejwt.settings import api_settings
from rest_framework_simplejwt.utils import aware_utcnow

from accounts.models import Account
from accounts.selectors import public_id_of
from config.sql import columns, fetch, from_row


class RefreshToken(tokens.RefreshToken):
    @classmethod
    def for_user(cls, user: AbstractBaseUser) -> RefreshToken:
        # simplejwt reads ``getattr(user, USER_ID_FIELD)``; the public id is on the account.
        token = cls()
        token[api_settings.USER_ID_CLAIM] = public_id_of(user)
        return token


class AccessToken(tokens.AccessToken):
    @classmethod
    def for_user(cls, user: AbstractBaseUser) -> AccessToken:
        token = cls()
        token[api_settings.USER_ID_CLAIM] = public_id_of(user)
        return token


def token_pair(user: AbstractBaseUser) -> dict[str, str]:
    refresh = RefreshToken.for_user(user)
    return {"access": str(refresh.access_token), "refresh": str(refresh)}


class TokenObtainSerializer(jwt_serializers.TokenObtainPairSerializer):
    token_class = RefreshToken


class TokenRefreshSerializer(jwt_serializers.TokenRefreshSerializer):
    def validate(self, attrs: dict[str, Any]) -> dict[str, str]:
        try:
            return super().validate(attrs)
        except get_user_model().DoesNotExist:  # the token's user was deleted since
            raise exceptions.AuthenticationFailed("No active account found for the given token.") from None


@functools.cache
def _user_sql() -> str:
    # Written once (the user model is known only once the apps are loaded): every
    # authenticated request runs it, and compiling the same ORM query each time cost
    # more than the rest of the lookup.
    user_model = get_user_model()
    return (
        f"SELECT {columns(user_model, 'u')}, {columns(Account, 'a')} FROM {user_model._meta.db_table} u "
        f"JOIN {Account._meta.db_table} a ON a.user_id = u.{user_model._meta.pk.column} WHERE a.public_id = %s"
    )


# Access tokens this process has checked, by their text (their signature included).
_CHECKED: dict[bytes, tokens.Token] = {}
_CHECKED_MAX = 10_000


class UserJWTAuthentication(JWTAuthentication):
    """The user API's authentication: the user named by the token's public id, with
    their account joined in the same statement (``public_id_of`` then costs nothing),
    a fixed statement rather than an ORM query built per request."""

    def get_validated_token(self, raw_token: bytes) -> tokens.Token:
        """The header's token, its signature checked once per process: a client sends
        the same access token with each request until it expires, and checking and
        decoding it again was about a twentieth of ``POST /ai/jobs``. Only the very same
        text finds an earlier check, and its expiry is checked every time."""
        token = _CHECKED.get(raw_token)
        if token is not None:
            try:
                token.check_exp(current_time=aware_utcnow())
                return token
            except TokenError:
                _CHECKED.pop(raw_token, None)  # expired: checked again, to fail as simplejwt says
        token = super().get_validated_token(raw_token)
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED[raw_token] = token
        return token

    def get_user(self, validated_token: tokens.Token) -> AbstractBaseUser:
        try:
            public_id = validated_token[api_settings.USER_ID_CLAIM]
        except KeyError:
            raise InvalidToken("Token contained no recognizable user identification") from None
        rows = fetch(_user_sql(), [str(public_id)])
        if not rows:
            raise exceptions.AuthenticationFailed("User not found", code="user_not_found")
        user = from_row(get_user_model(), rows[0])
        user.account = from_row(Account, rows[0][-len(Account._meta.concrete_fields) :])  # type: ignore[attr-defined]
        if api_settings.CHECK_USER_IS_ACTIVE and not user.is_active:
            raise exceptions.AuthenticationFailed("User is inactive", code="user_inactive")
        return user


class UserJWTScheme(SimpleJWTScheme):
    """The OpenAPI schema's ``jwtAuth``, for the user API's authentication."""

    target_class = UserJWTAuthentication
