"""JWTs that name their user by the public id (contract §2): the token a client
holds carries ``sub: "usr_…"``, never the database's integer key."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from drf_spectacular.contrib.rest_framework_simplejwt import SimpleJWTScheme
from rest_framework import exceptions
from rest_framework_simplejwt import serializers as jwt_serializers
from rest_framework_simplejwt import tokens
from rest_framework_simplejwt.authentication import JWTAuthentication
from rest_framework_simplejwt.exceptions import InvalidToken
from rest_framework_simplejwt.settings import api_settings

from accounts.selectors import public_id_of


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


class UserJWTAuthentication(JWTAuthentication):
    """The user API's authentication: the user named by the token's public id, with
    their account joined in the same statement (``public_id_of`` then costs nothing)."""

    def get_user(self, validated_token: tokens.Token) -> AbstractBaseUser:
        try:
            public_id = validated_token[api_settings.USER_ID_CLAIM]
        except KeyError:
            raise InvalidToken("Token contained no recognizable user identification") from None
        user = get_user_model().objects.select_related("account").filter(account__public_id=str(public_id)).first()
        if user is None:
            raise exceptions.AuthenticationFailed("User not found", code="user_not_found")
        if api_settings.CHECK_USER_IS_ACTIVE and not user.is_active:
            raise exceptions.AuthenticationFailed("User is inactive", code="user_inactive")
        return user


class UserJWTScheme(SimpleJWTScheme):
    """The OpenAPI schema's ``jwtAuth``, for the user API's authentication."""

    target_class = UserJWTAuthentication
