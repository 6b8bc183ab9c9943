"""A user's AI settings, written; and the move of their quota that a change of
timezone to another local date makes, so a quota cannot be stretched by timezones."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from config.errors import DomainError, ErrorCode
from config.sql import fetch
from quotas import queries
from quotas.models import UserAiSettings, validate_timezone
from quotas.selectors import ai_settings_get, local_date

_UNSET: object = object()


def ai_settings_write(
    *,
    user: AbstractBaseUser,
    by_staff: bool = False,
    ai_analysis_enabled: bool | object = _UNSET,
    timezone_name: str | object = _UNSET,
    default_api_key_mode: str | object = _UNSET,
    max_daily_ai_jobs: int | object = _UNSET,
    max_daily_token_budget: int | object = _UNSET,
) -> UserAiSettings:
    """Write a user's AI settings, and nothing else: the user's API and the admin
    change them through ``ai_jobs.services.ai_settings_update``, which also cancels the
    user's jobs when AI analysis is turned off. The limits are staff's to change.

    A new timezone whose local date differs from the old one's moves the user's quota
    to that day (``_quota_move``), in the same transaction, under the settings row's lock."""
    if not by_staff and (max_daily_ai_jobs is not _UNSET or max_daily_token_budget is not _UNSET):
        raise DomainError(ErrorCode.FORBIDDEN, "maxDailyAiJobs and maxDailyTokenBudget are changed only by staff")
    changes = {
        "ai_analysis_enabled": ai_analysis_enabled,
        "timezone": timezone_name,
        "default_api_key_mode": default_api_key_mode,
        "max_daily_ai_jobs": max_daily_ai_jobs,
        "max_daily_token_budget": max_daily_token_budget,
    }
    changes = {field: value for field, value in changes.items() if value is not _UNSET}
    if "timezone" in changes:
        try:
            validate_timezone(str(changes["timezone"]))
        except ValidationError as exc:
            raise DomainError(ErrorCode.VALIDATION_ERROR, exc.messages[0], fields={"timezone": exc.messages}) from None
    ai_settings_get(user=user)
    if changes:
        with transaction.atomic():
            current = UserAiSettings.objects.select_for_update().get(user=user)
            now = timezone.now()
            left = local_date(ai_settings=current, now=now)
            arrived = now.astimezone(ZoneInfo(str(changes.get("timezone", current.timezone)))).date()
            if arrived != left:
                changes["quota_epoch"] = current.quota_epoch + 1
            UserAiSettings.objects.filter(pk=current.pk).update(**changes, updated_at=now)
            if arrived != left:
                _quota_move(user_id=current.user_id, left=left, arrived=arrived, epoch=current.quota_epoch + 1, now=now)
    return ai_settings_get(user=user)


def _quota_move(*, user_id: int, left: dt.date, arrived: dt.date, epoch: int, now: dt.datetime) -> None:
    """A change of timezone moved the user from the local day ``left`` to ``arrived``:
    the day arrived in counts at least the jobs, tokens and cost of the day left (the
    larger of the two, per key mode: exact when one already holds the other, as after
    any earlier move, and never more than one day's limit between two of the user's
    midnights, however often they move). A job reserved on the day left under an older
    epoch is refused and counted again on the new day (``quota_reserve_job``); tokens
    landing on it later follow ``moved_to``. Arrival first, each row locked before it
    is read (``queries``: the timezone move)."""
    fetch(queries.ARRIVE_ON_DAY, {"user_id": user_id, "arrived": arrived, "now": now})
    fetch(queries.LEAVE_DAY, {"user_id": user_id, "left": left, "arrived": arrived, "epoch": epoch, "now": now})
    fetch(queries.CARRY_USAGE, {"user_id": user_id, "left": left, "arrived": arrived, "now": now})
