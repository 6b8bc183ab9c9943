"""Wire shapes of ``/auth/*`` (contract §2)."""

from __future__ import annotations

from django.contrib.auth.validators import UnicodeUsernameValidator
from rest_framework import serializers


class RegisterInSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150, validators=[UnicodeUsernameValidator()])
    password = serializers.CharField(max_length=128, trim_whitespace=False, write_only=True)
    email = serializers.EmailField(required=False, allow_blank=True, default="")


class RegisteredSerializer(serializers.Serializer):
    userId = serializers.CharField(help_text="The new user's opaque id (usr_…)")
    access = serializers.CharField()
    refresh = serializers.CharField()


class TokenPairSerializer(serializers.Serializer):
    access = serializers.CharField()
    refresh = serializers.CharField()


class AccessSerializer(serializers.Serializer):
    access = serializers.CharField()
    refresh = serializers.CharField(required=False, help_text="Only when refresh tokens rotate")
