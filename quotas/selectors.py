"""Reads that views, services and other apps share: a user's AI settings and the
usage of their day, the platform's usage today, the circuit breaker's state."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Collection
from dataclasses import dataclass
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from config import formatting
from config.days import platform_day
from config.sql import fetch, from_row
from quotas import queries
from quotas.models import ApiKeyMode, CircuitState, PlatformCircuitBreaker, UserAiSettings, UserAiUsage

CENTS_PLACES = Decimal("0.0001")  # cost_cents columns keep four decimals


def cents(value: object) -> Decimal:
    """A cost as its column keeps it: SQLite sums decimals as floats (0.46640000000000004)."""
    return Decimal(str(value)).quantize(CENTS_PLACES)


def as_date(value: object) -> dt.date:
    """A date column's value: PostgreSQL's driver gives a date, SQLite's the ISO text."""
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))


# --- the user's settings and day --------------------------------------------------------------------


def ai_settings_get(*, user: AbstractBaseUser | None = None, user_id: int | None = None) -> UserAiSettings:
    """The user's AI settings; a user who never had any gets the defaults, stored then
    (every later write locks that row)."""
    row, _ = UserAiSettings.objects.get_or_create(user_id=user.pk if user is not None else user_id)
    return row


def ai_analysis_enabled_of(*, user_ids: Collection[int]) -> dict[int, bool]:
    """Whether each user has AI analysis on (their consent), in one read; a user who
    never had settings has the default. Nothing is stored."""
    enabled = dict(
        UserAiSettings.objects.filter(user_id__in=list(user_ids)).values_list("user_id", "ai_analysis_enabled")
    )
    default = bool(settings.AI_ANALYSIS_ENABLED_BY_DEFAULT)
    return {user_id: enabled.get(user_id, default) for user_id in user_ids}


def local_date(*, ai_settings: UserAiSettings, now: dt.datetime | None = None) -> dt.date:
    """The user's calendar day in their own time zone (their quota's day)."""
    return (now or timezone.now()).astimezone(ZoneInfo(ai_settings.timezone)).date()


@dataclass(frozen=True)
class DailyUsage:
    api_key_mode: str
    job_count: int
    tokens_used: int
    cost_cents: Decimal


def _unused(mode: str) -> DailyUsage:
    return DailyUsage(api_key_mode=mode, job_count=0, tokens_used=0, cost_cents=Decimal(0))


def usage_of_day(*, user_id: int, day: dt.date) -> dict[str, DailyUsage]:
    """The user's jobs, tokens and cost of ``day``, per key mode (each counted apart)."""
    rows = {row.api_key_mode: row for row in UserAiUsage.objects.filter(user_id=user_id, local_date=day)}
    return {
        mode: DailyUsage(
            api_key_mode=mode,
            job_count=rows[mode].job_count,
            tokens_used=rows[mode].tokens_used,
            cost_cents=rows[mode].cost_cents,
        )
        if mode in rows
        else _unused(mode)
        for mode in ApiKeyMode.values
    }


@dataclass(frozen=True)
class QuotaState:
    """A user's settings, their calendar day, and that day's usage by key mode."""

    ai_settings: UserAiSettings
    day: dt.date
    usage: dict[str, DailyUsage]


def quota_state_get(*, user_id: int, now: dt.datetime | None = None) -> QuotaState:
    """The user's settings and today's usage, in one statement once the settings row
    exists (on first use: the defaults, then the day read as usual)."""
    now = now or timezone.now()
    utc_day = now.astimezone(dt.UTC).date()
    rows = fetch(
        queries.SETTINGS_AND_USAGE,
        {"user_id": user_id, "first_day": utc_day - dt.timedelta(days=1), "last_day": utc_day + dt.timedelta(days=1)},
    )
    if not rows:
        ai_settings = ai_settings_get(user_id=user_id)
        day = local_date(ai_settings=ai_settings, now=now)
        return QuotaState(ai_settings=ai_settings, day=day, usage=usage_of_day(user_id=user_id, day=day))
    width = len(queries.SETTINGS_FIELDS)
    ai_settings = from_row(UserAiSettings, rows[0], attnames=queries.SETTINGS_FIELDS)
    day = local_date(ai_settings=ai_settings, now=now)
    found = {
        mode: DailyUsage(api_key_mode=mode, job_count=int(jobs), tokens_used=int(tokens), cost_cents=cents(cost))
        for on, mode, jobs, tokens, cost in (row[width:] for row in rows)
        if on is not None and as_date(on) == day
    }
    usage = {mode: found.get(mode) or _unused(mode) for mode in ApiKeyMode.values}
    return QuotaState(ai_settings=ai_settings, day=day, usage=usage)


# --- the platform's day (``config.days.platform_day``: the date in PLATFORM_TIMEZONE) ---------------


@dataclass(frozen=True)
class PlatformUsage:
    day: dt.date
    tokens_used: int
    cost_cents: Decimal
    token_budget: int
    cost_budget_cents: int

    def over_budget(self) -> str:
        """Why the day's platform budget is used up, or "" while it is not."""
        if self.tokens_used >= self.token_budget:
            return f"Platform daily token budget used: {formatting.tokens_of(self.tokens_used, self.token_budget)}"
        if self.cost_cents >= self.cost_budget_cents:
            return f"Platform daily cost budget used: {formatting.dollars_of(self.cost_cents, self.cost_budget_cents)}"
        return ""


def platform_usage(*, day: dt.date, tokens: object, cost: object) -> PlatformUsage:
    """The platform's usage of ``day`` from the sums a statement read, against today's budgets."""
    return PlatformUsage(
        day=day,
        tokens_used=int(tokens),  # type: ignore[call-overload]
        cost_cents=cents(cost),
        token_budget=settings.PLATFORM_DAILY_TOKEN_BUDGET,
        cost_budget_cents=settings.PLATFORM_DAILY_COST_BUDGET_CENTS,
    )


def platform_usage_today() -> PlatformUsage:
    """The platform key's tokens and cost today (plain SQL: every platform-key result reads it)."""
    day = platform_day()
    ((tokens, cost),) = fetch(queries.PLATFORM_USAGE_OF_DAY, {"day": day})
    return platform_usage(day=day, tokens=tokens, cost=cost)


def platform_over_budget() -> str:
    """Why the platform key is over today's budget, or "" when it is not."""
    return platform_usage_today().over_budget()


# --- the circuit breaker ------------------------------------------------------------------------------


def breaker_get() -> PlatformCircuitBreaker:
    """The platform key's one breaker (made closed on first read)."""
    row, _ = PlatformCircuitBreaker.objects.get_or_create(id=1)
    return row


# The breaker's state as this process last read it: a hint for the claim (whether to
# look for half-open trial jobs), never a guard; the guards are in the claim's SQL.
BREAKER_STATE_MAX_AGE_SECONDS = 1.0
_breaker_seen: tuple[float, str] | None = None


def breaker_state_hint() -> str:
    """The breaker's state, read at most once a second per process."""
    global _breaker_seen
    now = time.monotonic()
    if _breaker_seen is None or now - _breaker_seen[0] >= BREAKER_STATE_MAX_AGE_SECONDS:
        rows = fetch(queries.BREAKER_STATE)
        _breaker_seen = (now, rows[0][0] if rows else CircuitState.CLOSED.value)
    return _breaker_seen[1]


def breaker_state_forget() -> None:
    """The next hint reads the database (the breaker moved in this process)."""
    global _breaker_seen
    _breaker_seen = None
