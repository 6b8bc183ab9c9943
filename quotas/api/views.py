"""``/ai/profile`` and ``/ai/settings``: a settings change goes through
``ai_jobs.services.ai_settings_update``, which cancels the user's jobs when AI analysis
is turned off."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.selectors import public_id_of
from ai_jobs import services as job_services
from config.errors import ErrorCode
from config.openapi import raises
from quotas import selectors
from quotas.api import serializers as s
from quotas.models import ApiKeyMode, CircuitState, UserAiSettings
from quotas.throttles import UserThrottle

# What the admin checks for the same change (quotas.admin): a staff flag alone is a learner's power.
CHANGE_LIMITS_PERMISSION = "quotas.change_useraisettings"


def _settings_body(row: UserAiSettings) -> dict[str, Any]:
    body = {
        "aiAnalysisEnabled": row.ai_analysis_enabled,
        "timezone": row.timezone,
        "defaultApiKeyMode": row.default_api_key_mode,
        "maxDailyAiJobs": row.max_daily_ai_jobs,
        "maxDailyTokenBudget": row.max_daily_token_budget,
        "localDate": selectors.local_date(ai_settings=row),
    }
    return s.AiSettingsSerializer(body).data


class UserView(APIView):
    throttle_classes = [UserThrottle]


@extend_schema(tags=["ai"], responses=s.AiProfileSerializer)
class AiProfileView(UserView):
    """Read the caller's AI profile: their id, consent, timezone and today's use by key mode,
    and whether the platform's key is available now (its circuit breaker)."""

    def get(self, request: Request) -> Response:
        row = selectors.ai_settings_get(user=request.user)
        day = selectors.local_date(ai_settings=row)
        usage = selectors.usage_of_day(user_id=row.user_id, day=day)
        breaker = selectors.breaker_get()
        over_budget = selectors.platform_over_budget()
        available = breaker.state != CircuitState.OPEN and not over_budget
        message = {
            CircuitState.CLOSED: "Platform key available",
            CircuitState.OPEN: "Platform key paused by the circuit breaker; your own key still works",
            CircuitState.HALF_OPEN: "Platform key on trial: only a few jobs at a time",
        }[CircuitState(breaker.state)]
        body = {
            "userId": public_id_of(request.user),
            "aiAnalysisEnabled": row.ai_analysis_enabled,
            "timezone": row.timezone,
            "localDate": day,
            "defaultApiKeyMode": row.default_api_key_mode,
            "usage": {
                mode: {
                    "jobCount": usage[mode].job_count,
                    "maxDailyAiJobs": row.max_daily_ai_jobs,
                    "jobsRemaining": max(0, row.max_daily_ai_jobs - usage[mode].job_count),
                    "tokensUsed": usage[mode].tokens_used,
                    "maxDailyTokenBudget": row.max_daily_token_budget,
                    "tokensRemaining": max(0, row.max_daily_token_budget - usage[mode].tokens_used),
                    "costCents": usage[mode].cost_cents,
                }
                for mode in ApiKeyMode.values
            },
            "circuit": {
                "state": breaker.state,
                "platformKeyAvailable": available,
                "message": over_budget or message,
            },
        }
        return Response(s.AiProfileSerializer(body).data)


@extend_schema(tags=["ai"])
class AiSettingsView(UserView):
    @extend_schema(responses=s.AiSettingsSerializer)
    def get(self, request: Request) -> Response:
        """Read the caller's AI settings: consent, timezone, default key mode and daily limits."""
        return Response(_settings_body(selectors.ai_settings_get(user=request.user)))

    @extend_schema(request=s.AiSettingsPatchSerializer, responses=s.AiSettingsSerializer)
    @raises(ErrorCode.FORBIDDEN)
    def patch(self, request: Request) -> Response:
        """Change the caller's AI settings: turn AI analysis on (their consent) or off, set the
        timezone their day follows, the default key mode. The daily limits are staff's to change."""
        serializer = s.AiSettingsPatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        names = {
            "aiAnalysisEnabled": "ai_analysis_enabled",
            "timezone": "timezone_name",
            "defaultApiKeyMode": "default_api_key_mode",
            "maxDailyAiJobs": "max_daily_ai_jobs",
            "maxDailyTokenBudget": "max_daily_token_budget",
        }
        # The limits are staff's with the admin's permission to change them, never the
        # staff flag alone; asked only when the limits are sent, so no other PATCH reads it.
        by_staff = bool(
            ("maxDailyAiJobs" in data or "maxDailyTokenBudget" in data)
            and request.user.is_staff
            and request.user.has_perm(CHANGE_LIMITS_PERMISSION)
        )
        row = job_services.ai_settings_update(
            user=request.user, by_staff=by_staff, **{names[key]: value for key, value in data.items()}
        )
        return Response(_settings_body(row))
