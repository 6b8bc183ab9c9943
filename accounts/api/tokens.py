"""The user API's JWT authentication: the user named by the token's
public id, loaded with their account in one fixed statement, and only while the token
is current: the user exists, is active and has the password the token was issued
under (``accounts.tokens``)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from drf_spectacular.contrib.rest_framework_simplejwt import SimpleJWTScheme
from rest_framework import exceptions
from rest_framework_simplejwt import serializers as jwt_serializers
from rest_framework_simplejwt import tokens
from rest_framework_simplejwt.authentication import JWTAuthentication
from rest_framework_simplejwt.exceptions import InvalidToken, TokenError
from rest_framework_simplejwt.settings import api_settings
from rest_framework_simplejwt.utils import aware_utcnow

from accounts.selectors import user_with_account
from accounts.tokens import AccessToken, RefreshToken, token_is_current, token_pair

__all__ = ["AccessToken", "RefreshToken", "TokenObtainSerializer", "UserJWTAuthentication", "token_pair"]


class TokenObtainSerializer(jwt_serializers.TokenObtainPairSerializer):
    token_class = RefreshToken


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
        user = user_with_account(str(public_id))
        if user is None:
            raise exceptions.AuthenticationFailed("User not found", code="user_not_found")
        if api_settings.CHECK_USER_IS_ACTIVE and not user.is_active:
            raise exceptions.AuthenticationFailed("User is inactive", code="user_inactive")
        # The password it was issued under, read from the row the statement above
        # returned already: no statement more, and the digest is cached per process.
        if not token_is_current(validated_token, user):
            raise exceptions.AuthenticationFailed(
                "The account's password changed since this token was issued", code="password_changed"
            )
        return user


class UserJWTScheme(SimpleJWTScheme):
    """The OpenAPI schema's ``jwtAuth``, for the user API's authentication."""

    target_class = UserJWTAuthentication
