"""Wire shapes of ``/auth/*``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.validators import UnicodeUsernameValidator
from rest_framework import serializers

from accounts.usernames import username_normalize


class UsernameField(serializers.CharField):
    """A username as it is stored (``accounts.usernames``): validated after it is
    normalized, so a fullwidth or padded name is judged as the name it becomes."""

    def to_internal_value(self, data: Any) -> str:
        return username_normalize(super().to_internal_value(data))


class RegisterInSerializer(serializers.Serializer):
    username = UsernameField(max_length=150, validators=[UnicodeUsernameValidator()])
    password = serializers.CharField(max_length=128, trim_whitespace=False, write_only=True)
    email = serializers.EmailField(required=False, allow_blank=True, default="")


class RegisteredSerializer(serializers.Serializer):
    userId = serializers.CharField(help_text="The new user's opaque id (usr_…)")
    access = serializers.CharField()
    refresh = serializers.CharField()


class TokenPairSerializer(serializers.Serializer):
    access = serializers.CharField()
    refresh = serializers.CharField()


class RefreshInSerializer(serializers.Serializer):
    refresh = serializers.CharField(write_only=True)


class RotatedSerializer(serializers.Serializer):
    access = serializers.CharField()
    refresh = serializers.CharField(help_text="The refresh token to use next: the one sent is used up")


class PasswordChangeInSerializer(serializers.Serializer):
    oldPassword = serializers.CharField(max_length=128, trim_whitespace=False, write_only=True)
    newPassword = serializers.CharField(max_length=128, trim_whitespace=False, write_only=True)
