"""Wire shapes of the user's AI settings and status."""

from __future__ import annotations

from rest_framework import serializers

from config.openapi import ChoiceString
from quotas.models import ApiKeyMode, validate_timezone


class AiSettingsSerializer(serializers.Serializer):
    aiAnalysisEnabled = serializers.BooleanField()
    timezone = serializers.CharField()
    defaultApiKeyMode = ChoiceString(ApiKeyMode.choices)
    maxDailyAiJobs = serializers.IntegerField()
    maxDailyTokenBudget = serializers.IntegerField()
    localDate = serializers.DateField()


class AiSettingsPatchSerializer(serializers.Serializer):
    aiAnalysisEnabled = serializers.BooleanField(required=False)
    timezone = serializers.CharField(required=False, max_length=64, validators=[validate_timezone])
    defaultApiKeyMode = serializers.ChoiceField(choices=ApiKeyMode.choices, required=False)
    maxDailyAiJobs = serializers.IntegerField(required=False, min_value=0, max_value=100_000, help_text="staff only")
    maxDailyTokenBudget = serializers.IntegerField(
        required=False, min_value=0, max_value=10_000_000_000, help_text="staff only"
    )


class UsageSerializer(serializers.Serializer):
    jobCount = serializers.IntegerField()
    maxDailyAiJobs = serializers.IntegerField()
    jobsRemaining = serializers.IntegerField()
    tokensUsed = serializers.IntegerField()
    maxDailyTokenBudget = serializers.IntegerField()
    tokensRemaining = serializers.IntegerField()
    costCents = serializers.DecimalField(max_digits=16, decimal_places=4, coerce_to_string=False)


class UsageByModeSerializer(serializers.Serializer):
    platform_key = UsageSerializer()
    user_deepseek_key = UsageSerializer()


class CircuitSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=["closed", "open", "half_open"])
    platformKeyAvailable = serializers.BooleanField()
    message = serializers.CharField()


class AiProfileSerializer(serializers.Serializer):
    userId = serializers.CharField(help_text="The caller's opaque id (usr_…): the targetId of their user target")
    aiAnalysisEnabled = serializers.BooleanField()
    timezone = serializers.CharField()
    localDate = serializers.DateField()
    defaultApiKeyMode = ChoiceString(ApiKeyMode.choices)
    usage = UsageByModeSerializer()
    circuit = CircuitSerializer()
