"""The user's day: jobs reserved against its limits, tokens and cost counted on it,
each key mode apart. A job's tokens count on the day the job was counted on (its
``quota_date``); what lands on a day the user has left by a change of timezone counts
on the day they moved to as well. Platform-key usage counts for the platform's day too.

Every counter moves with one conditional statement, never a read followed by a write
in Python."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.db import connection
from django.utils import timezone

from config.errors import DomainError, ErrorCode
from config.sql import fetch
from quotas import queries
from quotas.models import ApiKeyMode, UserAiSettings
from quotas.selectors import (
    DailyUsage,
    ai_settings_get,
    as_date,
    local_date,
    platform_day,
    platform_usage,
    quota_state_get,
    usage_of_day,
)
from quotas.services.breaker import breaker_close_if_half_open, breaker_open_over_budget, breaker_reset_failures
from quotas.services.budget import platform_shard, platform_usage_add

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


def _add_user_usage(*, user_id: int, day: dt.date, api_key_mode: str, tokens: int, cost_cents: Decimal) -> object:
    """Add to the user's day; the day a change of timezone moved them to from it, if any."""
    ((moved_to,),) = fetch(
        queries.ADD_USER_USAGE,
        {
            "user_id": user_id,
            "day": day,
            "api_key_mode": api_key_mode,
            "tokens": tokens,
            "cost_cents": cost_cents,
            "now": timezone.now(),
        },
    )
    return moved_to


def _follow_moves(
    *, user_id: int, day: dt.date, moved_to: object, api_key_mode: str, tokens: int, cost_cents: Decimal
) -> None:
    """Tokens that land on a ``day`` the user has left count on the day a change of
    timezone moved them to as well, and on from there if they moved again: the day
    they are on always holds at least what the day they left does, so a change of
    timezone dodges no result. Inside the caller's transaction, which holds each day's
    row from its count to the end."""
    seen = {day}
    while moved_to is not None and len(seen) < MOVES_FOLLOWED:
        day = as_date(moved_to)
        if day in seen:
            return
        seen.add(day)
        moved_to = _add_user_usage(
            user_id=user_id, day=day, api_key_mode=api_key_mode, tokens=tokens, cost_cents=cost_cents
        )


def _count_on_user_days(*, user_id: int, day: dt.date, api_key_mode: str, tokens: int, cost_cents: Decimal) -> None:
    moved_to = _add_user_usage(
        user_id=user_id, day=day, api_key_mode=api_key_mode, tokens=tokens, cost_cents=cost_cents
    )
    _follow_moves(
        user_id=user_id, day=day, moved_to=moved_to, api_key_mode=api_key_mode, tokens=tokens, cost_cents=cost_cents
    )


def usage_record_calls(
    *, user_id: int, quota_date: dt.date | None, api_key_mode: str, total_tokens: int, cost_cents: Decimal
) -> None:
    """Count model calls' tokens and cost against the user's day (the day the job was
    counted on: its ``quota_date``) and, platform key, the platform's day. Every model
    call counts: the accepted one through its result, the others through their
    invocation logs. Runs inside the caller's transaction."""
    day = _quota_day(user_id=user_id, quota_date=quota_date)
    _count_on_user_days(user_id=user_id, day=day, api_key_mode=api_key_mode, tokens=total_tokens, cost_cents=cost_cents)
    if api_key_mode == ApiKeyMode.PLATFORM_KEY:
        platform_usage_add(tokens=total_tokens, cost_cents=cost_cents)


def usage_record_result(
    *, user_id: int, quota_date: dt.date | None, api_key_mode: str, total_tokens: int, cost_cents: Decimal
) -> None:
    """Count a landed result's tokens and cost against the user's day, and for
    platform-key jobs against the platform's day; a platform-key success resets the
    breaker's failures and closes a half-open breaker. Runs inside the result's
    transaction: on PostgreSQL a platform-key result in one statement
    (``result_in_one_statement``), elsewhere step by step; the two count the same."""
    if api_key_mode == ApiKeyMode.PLATFORM_KEY and connection.vendor == "postgresql":
        result_in_one_statement(
            user_id=user_id, quota_date=quota_date, total_tokens=total_tokens, cost_cents=cost_cents
        )
    else:
        result_step_by_step(
            user_id=user_id,
            quota_date=quota_date,
            api_key_mode=api_key_mode,
            total_tokens=total_tokens,
            cost_cents=cost_cents,
        )


def result_step_by_step(
    *, user_id: int, quota_date: dt.date | None, api_key_mode: str, total_tokens: int, cost_cents: Decimal
) -> None:
    """A result counted statement by statement, on either database: the user's day,
    and for the platform key the breaker's failures, the platform's day (which opens
    the breaker once over budget), then a half-open breaker closed."""
    day = _quota_day(user_id=user_id, quota_date=quota_date)
    _count_on_user_days(user_id=user_id, day=day, api_key_mode=api_key_mode, tokens=total_tokens, cost_cents=cost_cents)
    if api_key_mode == ApiKeyMode.PLATFORM_KEY:
        state = breaker_reset_failures()
        platform_usage_add(tokens=total_tokens, cost_cents=cost_cents)
        breaker_close_if_half_open(state=state)


def result_in_one_statement(
    *, user_id: int, quota_date: dt.date | None, total_tokens: int, cost_cents: Decimal
) -> None:
    """A platform-key result as ``result_step_by_step`` counts it, its writes in one
    statement of PostgreSQL's (``queries.RECORD_PLATFORM_RESULT``); the breaker's row
    is written only when it changes."""
    day = _quota_day(user_id=user_id, quota_date=quota_date)
    today = platform_day()
    ((tokens, cost, state, moved_to),) = fetch(
        queries.RECORD_PLATFORM_RESULT,
        {
            "user_id": user_id,
            "day": day,
            "tokens": total_tokens,
            "cost_cents": cost_cents,
            "now": timezone.now(),
            "today": today,
            "shard": platform_shard(),
        },
    )
    _follow_moves(
        user_id=user_id,
        day=day,
        moved_to=moved_to,
        api_key_mode=ApiKeyMode.PLATFORM_KEY,
        tokens=total_tokens,
        cost_cents=cost_cents,
    )
    breaker_open_over_budget(reason=platform_usage(day=today, tokens=tokens, cost=cost).over_budget())
    breaker_close_if_half_open(state=state)
