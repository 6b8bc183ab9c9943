"""The user's day: jobs reserved against its limits, tokens and cost counted on it,
each key mode apart. A job's tokens count on the day the job was counted on (its
``quota_date``); what lands on a day the user has left by a change of timezone counts
on the day they moved to as well. Platform-key usage counts for the platform's day too.

Every counter moves with one conditional statement, never a read followed by a write
in Python."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.utils import timezone

from config.errors import DomainError, ErrorCode
from config.sql import fetch
from quotas import queries
from quotas.models import ApiKeyMode, UserAiSettings
from quotas.selectors import DailyUsage, ai_settings_get, local_date, quota_state_get, usage_of_day
from quotas.services.breaker import breaker_close_if_half_open, breaker_open_over_budget
from quotas.services.counting import Count, usage_count, user_day_count

# A user changing timezone as fast as they can while creating jobs: each attempt lost
# means another change of theirs committed in between.
RESERVE_ATTEMPTS = 10
# A user moves a few times a day at most; the bound only guards against a loop.
MOVES_FOLLOWED = 8


def quota_check(
    *, ai_settings: UserAiSettings, api_key_mode: str, day: dt.date, usage: DailyUsage | None = None
) -> None:
    """Read-only: refuse when the day's job count or token budget is used up (``usage``:
    the day's figures already read, else read here)."""
    if usage is None:
        usage = usage_of_day(user_id=ai_settings.user_id, day=day)[api_key_mode]
    if usage.job_count >= ai_settings.max_daily_ai_jobs:
        raise DomainError(
            ErrorCode.DAILY_JOB_LIMIT_EXCEEDED,
            f"{usage.job_count} of {ai_settings.max_daily_ai_jobs} AI jobs used on {day.isoformat()} ({api_key_mode})",
        )
    if usage.tokens_used >= ai_settings.max_daily_token_budget:
        raise DomainError(
            ErrorCode.DAILY_TOKEN_BUDGET_EXCEEDED,
            f"{usage.tokens_used} of {ai_settings.max_daily_token_budget} tokens used on {day.isoformat()} ({api_key_mode})",
        )


def quota_reserve_job(*, ai_settings: UserAiSettings, api_key_mode: str, day: dt.date) -> dt.date:
    """Count one more job for the day, only while under both limits: one upsert
    whose WHERE admits the increment, so concurrent requests at the limit never
    get more jobs than it allows. Returns the day it was counted on: ``day``, or the
    one a change of timezone (committed since ``ai_settings`` were read) moved the
    user to, whose limits it was then checked against."""
    for _ in range(RESERVE_ATTEMPTS):
        rows = fetch(
            queries.RESERVE_JOB,
            {
                "user_id": ai_settings.user_id,
                "day": day,
                "api_key_mode": api_key_mode,
                "now": timezone.now(),
                "max_jobs": ai_settings.max_daily_ai_jobs,
                "max_tokens": ai_settings.max_daily_token_budget,
                "epoch": ai_settings.quota_epoch,
            },
        )
        if rows:
            return day
        fresh = quota_state_get(user_id=ai_settings.user_id)
        quota_check(
            ai_settings=fresh.ai_settings, api_key_mode=api_key_mode, day=fresh.day, usage=fresh.usage[api_key_mode]
        )
        if fresh.ai_settings.quota_epoch == ai_settings.quota_epoch:
            break  # the day has not moved: it was its limit
        ai_settings, day = fresh.ai_settings, fresh.day
    raise DomainError(ErrorCode.DAILY_JOB_LIMIT_EXCEEDED, "The daily AI job limit is reached")


def _quota_day(*, user_id: int, quota_date: dt.date | None) -> dt.date:
    # A job made outside POST /ai/jobs has no quota day: it counts today.
    return quota_date or local_date(ai_settings=ai_settings_get(user_id=user_id))


def _follow_moves(
    *, user_id: int, day: dt.date, moved_to: dt.date | None, api_key_mode: str, tokens: int, cost_cents: Decimal
) -> None:
    """Tokens that land on a ``day`` the user has left count on the day a change of
    timezone moved them to as well, and on from there if they moved again: the day
    they are on always holds at least what the day they left does, so a change of
    timezone dodges no result. Inside the caller's transaction, which holds each day's
    row from its count to the end."""
    seen = {day}
    while moved_to is not None and len(seen) < MOVES_FOLLOWED:
        if moved_to in seen:
            return
        seen.add(moved_to)
        moved_to = user_day_count(
            user_id=user_id, day=moved_to, api_key_mode=api_key_mode, tokens=tokens, cost_cents=cost_cents
        ).moved_to


def _record(
    *, user_id: int, quota_date: dt.date | None, api_key_mode: str, tokens: int, cost_cents: Decimal, success: bool
) -> None:
    day = _quota_day(user_id=user_id, quota_date=quota_date)
    platform = api_key_mode == ApiKeyMode.PLATFORM_KEY
    counted = usage_count(
        Count(
            user_id=user_id,
            day=day,
            api_key_mode=api_key_mode,
            tokens=tokens,
            cost_cents=cost_cents,
            platform=platform,
            success=success and platform,
        )
    )
    _follow_moves(
        user_id=user_id,
        day=day,
        moved_to=counted.moved_to,
        api_key_mode=api_key_mode,
        tokens=tokens,
        cost_cents=cost_cents,
    )
    if counted.platform is not None:
        breaker_open_over_budget(reason=counted.platform.over_budget())
    breaker_close_if_half_open(state=counted.breaker_state)


def usage_record_calls(
    *, user_id: int, quota_date: dt.date | None, api_key_mode: str, total_tokens: int, cost_cents: Decimal
) -> None:
    """Count model calls' tokens and cost against the user's day (the day the job was
    counted on: its ``quota_date``) and, platform key, the platform's day, which opens
    the breaker once over budget. Every model call counts: the accepted one through its
    result, the others through their invocation logs. Runs inside the caller's transaction."""
    _record(
        user_id=user_id,
        quota_date=quota_date,
        api_key_mode=api_key_mode,
        tokens=total_tokens,
        cost_cents=cost_cents,
        success=False,
    )


def usage_record_result(
    *, user_id: int, quota_date: dt.date | None, api_key_mode: str, total_tokens: int, cost_cents: Decimal
) -> None:
    """Count a landed result's tokens and cost as ``usage_record_calls`` does; a
    platform-key success also starts the breaker's failures again and closes a half-open
    breaker. Runs inside the result's transaction."""
    _record(
        user_id=user_id,
        quota_date=quota_date,
        api_key_mode=api_key_mode,
        tokens=total_tokens,
        cost_cents=cost_cents,
        success=True,
    )
