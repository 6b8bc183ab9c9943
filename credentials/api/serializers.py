"""Wire shapes of the user's model credentials, camelCase. There is no
output field for the key: only its mask ever leaves."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.openapi import ChoiceString
from credentials.models import Credential, CredentialStatus, Provider
from credentials.services import API_KEY_MAX


class ModelCredentialCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False, default="DeepSeek key")
    provider = serializers.ChoiceField(choices=Provider.values, required=False, default=Provider.DEEPSEEK)
    # Format checks are the service's; a length cap here keeps absurd bodies out.
    apiKey = serializers.CharField(max_length=API_KEY_MAX, trim_whitespace=True, write_only=True)


class ModelCredentialUpdateSerializer(serializers.Serializer):
    """PUT (and PATCH) change what they name: a name, a new key, or both."""

    name = serializers.CharField(max_length=100, required=False)
    apiKey = serializers.CharField(max_length=API_KEY_MAX, trim_whitespace=True, required=False, write_only=True)


class ModelCredentialLastTestSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    httpStatus = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()


class ModelCredentialSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    provider = ChoiceString(Provider.values)
    baseUrl = serializers.CharField(source="effective_base_url")
    maskedKey = serializers.CharField(source="key_mask", help_text="e.g. sk-****abcd; the key itself is never returned")
    status = ChoiceString(
        CredentialStatus.values, help_text="active | invalid (the provider answered 401 to the last test)"
    )
    lastTestedAt = serializers.DateTimeField(source="last_tested_at", allow_null=True)
    lastTestResult = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

    @extend_schema_field(ModelCredentialLastTestSerializer(allow_null=True))
    def get_lastTestResult(self, credential: Credential) -> dict[str, Any] | None:
        if credential.last_tested_at is None:
            return None
        return {
            "ok": bool(credential.last_test_ok),
            "httpStatus": credential.last_test_http_status,
            "message": credential.last_test_message,
        }


class ModelCredentialTestSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    httpStatus = serializers.IntegerField(source="http_status", allow_null=True)
    message = serializers.CharField()
