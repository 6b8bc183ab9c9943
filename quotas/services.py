"""Quotas, the platform budget and the circuit breaker (seed 002 §2).

Every counter moves with one conditional statement — an upsert whose WHERE admits
the change only under the limit — never a read followed by a write in Python.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from dataclasses import dataclass
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from config import formatting
from config.errors import DomainError, ErrorCode
from config.sql import columns, fetch, from_row
from quotas.models import (
    PLATFORM_USAGE_SHARDS,
    ApiKeyMode,
    CircuitBreakerEvent,
    CircuitState,
    PlatformCircuitBreaker,
    PlatformDailyUsage,
    UserAiSettings,
    UserAiUsage,
    validate_timezone,
)

logger = logging.getLogger(__name__)

# Failures that say the platform's model is in trouble; a bad snapshot does not (seed
# 000's NETWORK_ERROR, TEMPORARY_PROVIDER_ERROR and INVALID_SCHEMA are its names for three of them).
MODEL_FAILURE_CODES = frozenset(
    {
        "MODEL_TIMEOUT",
        "MODEL_RATE_LIMIT",
        "MODEL_NETWORK_ERROR",
        "MODEL_RESPONSE_INVALID",
        "MODEL_JSON_PARSE_FAILED",
        "NETWORK_ERROR",
        "TEMPORARY_PROVIDER_ERROR",
        "INVALID_SCHEMA",
    }
)


# --- the user's settings and day --------------------------------------------------------------------


def ai_settings_get(*, user: AbstractBaseUser | None = None, user_id: int | None = None) -> UserAiSettings:
    """The user's AI settings, created with the defaults on first use."""
    row, _ = UserAiSettings.objects.get_or_create(user_id=user.pk if user is not None else user_id)
    return row


def local_date(*, ai_settings: UserAiSettings, now: dt.datetime | None = None) -> dt.date:
    """The user's calendar day in their own time zone (their quota's day)."""
    return (now or timezone.now()).astimezone(ZoneInfo(ai_settings.timezone)).date()


@dataclass(frozen=True)
class DailyUsage:
    api_key_mode: str
    job_count: int
    tokens_used: int
    cost_cents: Decimal


def usage_of_day(*, user_id: int, day: dt.date) -> dict[str, DailyUsage]:
    rows = {row.api_key_mode: row for row in UserAiUsage.objects.filter(user_id=user_id, local_date=day)}
    return {
        mode: DailyUsage(
            api_key_mode=mode,
            job_count=rows[mode].job_count if mode in rows else 0,
            tokens_used=rows[mode].tokens_used if mode in rows else 0,
            cost_cents=rows[mode].cost_cents if mode in rows else Decimal(0),
        )
        for mode in ApiKeyMode.values
    }


def _as_date(value: object) -> dt.date:
    # PostgreSQL's driver gives a date, SQLite's the ISO text.
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))


_SETTINGS_TABLE = UserAiSettings._meta.db_table
_USAGE_TABLE = UserAiUsage._meta.db_table
# A fixed statement (no ORM query built per request): the settings row, and the user's
# usage rows of the three calendar days one of which is theirs today (time zones lie
# within a day of UTC), joined, so ``POST /ai/jobs`` reads steps 4 and 7 in one go.
_SETTINGS_AND_USAGE_SQL = (
    f"SELECT {columns(UserAiSettings, 's')}, u.local_date, u.api_key_mode, u.job_count, u.tokens_used, u.cost_cents "
    f"FROM {_SETTINGS_TABLE} s LEFT JOIN {_USAGE_TABLE} u ON u.user_id = s.user_id "
    "AND u.local_date BETWEEN %s AND %s WHERE s.user_id = %s"
)
_SETTINGS_WIDTH = len(UserAiSettings._meta.concrete_fields)


@dataclass(frozen=True)
class QuotaState:
    """A user's settings, their calendar day, and that day's usage by key mode."""

    ai_settings: UserAiSettings
    day: dt.date
    usage: dict[str, DailyUsage]


def quota_state_get(*, user_id: int, now: dt.datetime | None = None) -> QuotaState:
    """The user's settings (created with the defaults on first use) and today's usage,
    in one statement while the settings row exists."""
    now = now or timezone.now()
    utc_day = now.astimezone(dt.UTC).date()
    rows = fetch(_SETTINGS_AND_USAGE_SQL, [utc_day - dt.timedelta(days=1), utc_day + dt.timedelta(days=1), user_id])
    if not rows:  # first use: the defaults, then the (empty) day read as usual
        ai_settings = ai_settings_get(user_id=user_id)
        day = local_date(ai_settings=ai_settings, now=now)
        return QuotaState(ai_settings=ai_settings, day=day, usage=usage_of_day(user_id=user_id, day=day))
    ai_settings = from_row(UserAiSettings, rows[0])
    day = local_date(ai_settings=ai_settings, now=now)
    found = {
        mode: (int(jobs), int(tokens), Decimal(str(cost)).quantize(CENTS_PLACES))
        for on, mode, jobs, tokens, cost in (row[_SETTINGS_WIDTH:] for row in rows)
        if on is not None and _as_date(on) == day
    }
    usage = {
        mode: DailyUsage(api_key_mode=mode, job_count=0, tokens_used=0, cost_cents=Decimal(0))
        if mode not in found
        else DailyUsage(
            api_key_mode=mode, job_count=found[mode][0], tokens_used=found[mode][1], cost_cents=found[mode][2]
        )
        for mode in ApiKeyMode.values
    }
    return QuotaState(ai_settings=ai_settings, day=day, usage=usage)


# --- the user's quota ----------------------------------------------------------------------------


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


# A day the user has left (``left_epoch`` above the ``quota_epoch`` their settings were
# read with) takes no more jobs; a job admitted on a day makes it the user's own again.
_RESERVE_SQL = (
    f"INSERT INTO {_USAGE_TABLE} (user_id, local_date, api_key_mode, job_count, tokens_used, cost_cents, updated_at) "
    "VALUES (%s, %s, %s, 1, 0, 0, %s) ON CONFLICT (user_id, local_date, api_key_mode) DO UPDATE "
    f"SET job_count = {_USAGE_TABLE}.job_count + 1, moved_to = NULL, left_epoch = NULL, "
    "updated_at = EXCLUDED.updated_at "
    f"WHERE {_USAGE_TABLE}.job_count < %s AND {_USAGE_TABLE}.tokens_used < %s "
    f"AND ({_USAGE_TABLE}.left_epoch IS NULL OR {_USAGE_TABLE}.left_epoch <= %s) RETURNING job_count"
)
# A user changing timezone as fast as they can while creating jobs: each attempt lost
# means another change of theirs committed in between.
RESERVE_ATTEMPTS = 10


def quota_reserve_job(*, ai_settings: UserAiSettings, api_key_mode: str, day: dt.date) -> dt.date:
    """Count one more job for the day, only while under both limits: one upsert
    whose WHERE admits the increment, so concurrent requests at the limit never
    get more jobs than it allows. Returns the day it was counted on: ``day``, or the
    one a change of timezone (committed since ``ai_settings`` were read) moved the
    user to, whose limits it was then checked against."""
    for _ in range(RESERVE_ATTEMPTS):
        rows = fetch(
            _RESERVE_SQL,
            [ai_settings.user_id, day, api_key_mode, timezone.now(), ai_settings.max_daily_ai_jobs,
             ai_settings.max_daily_token_budget, ai_settings.quota_epoch],
        )  # fmt: skip
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


def usage_record_result(
    *, user_id: int, quota_date: dt.date | None, api_key_mode: str, total_tokens: int, cost_cents: Decimal
) -> None:
    """Count a landed result's tokens and cost against the user's day, and for
    platform-key jobs against the platform's day; a success resets the breaker's
    failures and closes a half-open breaker. Runs inside the result's transaction.

    On PostgreSQL a platform-key result does it all in ONE statement (the user's
    upsert, the platform shard's upsert, the day's total and the breaker's reset as
    data-modifying CTEs); the breaker row is written only when it changes. SQLite has
    no data-modifying CTEs: there the same steps are their own statements."""
    if api_key_mode != ApiKeyMode.PLATFORM_KEY or connection.vendor != "postgresql":
        usage_record_calls(
            user_id=user_id,
            quota_date=quota_date,
            api_key_mode=api_key_mode,
            total_tokens=total_tokens,
            cost_cents=cost_cents,
        )
        if api_key_mode == ApiKeyMode.PLATFORM_KEY:
            breaker_record_success()
        return
    day = quota_date or local_date(ai_settings=ai_settings_get(user_id=user_id))
    now, today, shard = timezone.now(), platform_day(), random.randrange(PLATFORM_USAGE_SHARDS)
    ((tokens, cost, state, moved_to),) = fetch(
        _RESULT_USAGE_SQL,
        [user_id, day, api_key_mode, total_tokens, cost_cents, now, today, shard, total_tokens, cost_cents, now,
         today, shard],
    )  # fmt: skip
    _count_where_moved(
        user_id=user_id, day=day, moved_to=moved_to, api_key_mode=api_key_mode, tokens=total_tokens,
        cost_cents=cost_cents,
    )  # fmt: skip
    _open_when_over_budget(_over_budget(_platform_usage(today, tokens, cost)))
    _close_after_half_open_success(state)


_USER_USAGE = UserAiUsage._meta.db_table
_PLATFORM_USAGE = PlatformDailyUsage._meta.db_table
# The statements of a CTE see the snapshot the statement began with, not each other's
# writes: the day's total is this shard's new row plus the other shards.
_RESULT_USAGE_SQL = (
    f"WITH user_day AS (INSERT INTO {_USER_USAGE} "
    "(user_id, local_date, api_key_mode, job_count, tokens_used, cost_cents, updated_at) "
    "VALUES (%s, %s, %s, 0, %s, %s, %s) ON CONFLICT (user_id, local_date, api_key_mode) DO UPDATE "
    f"SET tokens_used = {_USER_USAGE}.tokens_used + EXCLUDED.tokens_used, "
    f"cost_cents = {_USER_USAGE}.cost_cents + EXCLUDED.cost_cents, updated_at = EXCLUDED.updated_at "
    "RETURNING moved_to), "
    f"shard AS (INSERT INTO {_PLATFORM_USAGE} (day, shard, tokens_used, cost_cents, updated_at) "
    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (day, shard) DO UPDATE "
    f"SET tokens_used = {_PLATFORM_USAGE}.tokens_used + EXCLUDED.tokens_used, "
    f"cost_cents = {_PLATFORM_USAGE}.cost_cents + EXCLUDED.cost_cents, updated_at = EXCLUDED.updated_at "
    "RETURNING tokens_used, cost_cents), "
    f"breaker AS (UPDATE {PlatformCircuitBreaker._meta.db_table} SET consecutive_failures = 0 WHERE id = 1 "
    "AND (consecutive_failures > 0 OR state = 'half_open') RETURNING state), "
    "others AS (SELECT COALESCE(SUM(tokens_used), 0) AS tokens, COALESCE(SUM(cost_cents), 0) AS cost "
    f"FROM {_PLATFORM_USAGE} WHERE day = %s AND shard <> %s) "
    "SELECT (SELECT tokens_used FROM shard) + (SELECT tokens FROM others), "
    "(SELECT cost_cents FROM shard) + (SELECT cost FROM others), (SELECT state FROM breaker), "
    "(SELECT moved_to FROM user_day)"
)


def usage_record_calls(
    *, user_id: int, quota_date: dt.date | None, api_key_mode: str, total_tokens: int, cost_cents: Decimal
) -> None:
    """Count model calls' tokens and cost against the user's day (the day the job was
    counted on: its ``quota_date``) and, platform key, the platform's day. Every model
    call counts (contract §3): the accepted one through its result, the others through
    their invocation logs. Runs inside the caller's transaction."""
    # A job made outside POST /ai/jobs has no quota day: it counts today.
    day = quota_date or local_date(ai_settings=ai_settings_get(user_id=user_id))
    ((moved_to,),) = fetch(_ADD_TOKENS_SQL, [user_id, day, api_key_mode, total_tokens, cost_cents, timezone.now()])
    _count_where_moved(
        user_id=user_id, day=day, moved_to=moved_to, api_key_mode=api_key_mode, tokens=total_tokens,
        cost_cents=cost_cents,
    )  # fmt: skip
    if api_key_mode == ApiKeyMode.PLATFORM_KEY:
        platform_usage_add(tokens=total_tokens, cost_cents=cost_cents)


_ADD_TOKENS_SQL = (
    f"INSERT INTO {_USER_USAGE} (user_id, local_date, api_key_mode, job_count, tokens_used, cost_cents, updated_at) "
    "VALUES (%s, %s, %s, 0, %s, %s, %s) ON CONFLICT (user_id, local_date, api_key_mode) DO UPDATE "
    f"SET tokens_used = {_USER_USAGE}.tokens_used + EXCLUDED.tokens_used, "
    f"cost_cents = {_USER_USAGE}.cost_cents + EXCLUDED.cost_cents, updated_at = EXCLUDED.updated_at RETURNING moved_to"
)
# A user moves a few times a day at most; the bound only guards against a loop.
MOVES_FOLLOWED = 8


def _count_where_moved(
    *, user_id: int, day: dt.date, moved_to: object, api_key_mode: str, tokens: int, cost_cents: Decimal
) -> None:
    """Tokens that land on a ``day`` the user has left (a job's tokens count on the day
    it was counted on) count on the day a change of timezone moved them to as well, and
    on from there if they moved again: the day they are on always holds at least what
    the day they left does, so a change of timezone dodges no result. Inside the
    result's transaction, which holds each day's row from its count to the end."""
    seen = {day}
    while moved_to is not None and len(seen) < MOVES_FOLLOWED:
        day = _as_date(moved_to)
        if day in seen:
            return
        seen.add(day)
        ((moved_to,),) = fetch(_ADD_TOKENS_SQL, [user_id, day, api_key_mode, tokens, cost_cents, timezone.now()])


# --- the platform's day -----------------------------------------------------------------------------


def platform_day(now: dt.datetime | None = None) -> dt.date:
    return (now or timezone.now()).astimezone(dt.UTC).date()


def platform_usage_add(*, tokens: int, cost_cents: Decimal) -> None:
    """Add to a random shard of today's platform usage; going over a budget opens the breaker."""
    table = PlatformDailyUsage._meta.db_table
    day = platform_day()
    fetch(
        f"INSERT INTO {table} (day, shard, tokens_used, cost_cents, updated_at) VALUES (%s, %s, %s, %s, %s) "
        f"ON CONFLICT (day, shard) DO UPDATE SET tokens_used = {table}.tokens_used + EXCLUDED.tokens_used, "
        f"cost_cents = {table}.cost_cents + EXCLUDED.cost_cents, updated_at = EXCLUDED.updated_at",
        [day, random.randrange(PLATFORM_USAGE_SHARDS), tokens, cost_cents, timezone.now()],
    )
    _open_when_over_budget(platform_over_budget())


def _open_when_over_budget(over: str) -> None:
    """``over``: why today's platform budget is used up ("" when it is not): the breaker opens."""
    if over:
        breaker_transition(
            to=CircuitState.OPEN, actor="system", reason=over, only_from=(CircuitState.CLOSED, CircuitState.HALF_OPEN)
        )


def _close_after_half_open_success(state: str | None) -> None:
    """``state``: the breaker's, as a success found it; a half-open one closes."""
    if state == CircuitState.HALF_OPEN:
        breaker_transition(
            to=CircuitState.CLOSED,
            actor="system",
            reason="A platform-key job succeeded while half-open",
            only_from=(CircuitState.HALF_OPEN,),
        )


CENTS_PLACES = Decimal("0.0001")  # cost_cents columns keep four decimals


@dataclass(frozen=True)
class PlatformUsage:
    day: dt.date
    tokens_used: int
    cost_cents: Decimal
    token_budget: int
    cost_budget_cents: int


def platform_usage_today() -> PlatformUsage:
    day = platform_day()
    # Plain SQL: this runs in every platform-key result's transaction.
    ((tokens, cost),) = fetch(
        f"SELECT COALESCE(SUM(tokens_used), 0), COALESCE(SUM(cost_cents), 0) FROM {PlatformDailyUsage._meta.db_table} "
        "WHERE day = %s",
        [day],
    )
    return _platform_usage(day, tokens, cost)


def _platform_usage(day: dt.date, tokens: object, cost: object) -> PlatformUsage:
    return PlatformUsage(
        day=day,
        tokens_used=int(tokens),  # type: ignore[call-overload]
        # SQLite sums decimals as floats (0.46640000000000004): back to the column's 4 places.
        cost_cents=Decimal(str(cost)).quantize(CENTS_PLACES),
        token_budget=settings.PLATFORM_DAILY_TOKEN_BUDGET,
        cost_budget_cents=settings.PLATFORM_DAILY_COST_BUDGET_CENTS,
    )


def platform_over_budget() -> str:
    """Why the platform key is over today's budget, or "" when it is not."""
    return _over_budget(platform_usage_today())


def _over_budget(usage: PlatformUsage) -> str:
    if usage.tokens_used >= usage.token_budget:
        return f"Platform daily token budget used: {formatting.tokens_of(usage.tokens_used, usage.token_budget)}"
    if usage.cost_cents >= usage.cost_budget_cents:
        return f"Platform daily cost budget used: {formatting.dollars_of(usage.cost_cents, usage.cost_budget_cents)}"
    return ""


# --- the circuit breaker ------------------------------------------------------------------------------


def breaker_get() -> PlatformCircuitBreaker:
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
        rows = fetch(f"SELECT state FROM {PlatformCircuitBreaker._meta.db_table} WHERE id = 1", [])
        _breaker_seen = (now, rows[0][0] if rows else CircuitState.CLOSED.value)
    return _breaker_seen[1]


def breaker_state_forget() -> None:
    global _breaker_seen
    _breaker_seen = None


def breaker_hold_half_open() -> bool:
    """Inside a transaction: lock the breaker row if it is half-open, so trial
    platform-key jobs are admitted one decision at a time. False when it is not half-open."""
    held = PlatformCircuitBreaker.objects.select_for_update().filter(id=1, state=CircuitState.HALF_OPEN)
    return bool(list(held.values_list("id", flat=True)))


def breaker_transition(*, to: str, actor: str, reason: str, only_from: tuple[str, ...] | None = None) -> bool:
    """Move the breaker to ``to`` with a compare-and-set on its current state, and
    record who and why. False when it was already there or not in ``only_from``."""
    for _ in range(5):
        current = breaker_get()
        if current.state == to or (only_from is not None and current.state not in only_from):
            return False
        with transaction.atomic():
            changed = PlatformCircuitBreaker.objects.filter(id=1, state=current.state).update(
                state=to,
                consecutive_failures=0 if to == CircuitState.CLOSED else current.consecutive_failures,
                changed_at=timezone.now(),
                changed_by=actor[:150],
                reason=reason,
            )
            if changed:
                breaker_state_forget()
                CircuitBreakerEvent.objects.create(
                    from_state=current.state,
                    to_state=to,
                    actor=actor[:150],
                    reason=reason,
                    consecutive_failures=current.consecutive_failures,
                )
                logger.warning("circuit breaker %s -> %s by %s: %s", current.state, to, actor, reason)
                return True
    return False


def breaker_record_failure() -> None:
    """A platform-key model failure: count it; the threshold opens the breaker, and
    any failure while half-open opens it again. One statement once the breaker's row exists."""
    table = PlatformCircuitBreaker._meta.db_table
    increment = (
        f"UPDATE {table} SET consecutive_failures = consecutive_failures + 1 WHERE id = 1 "
        "RETURNING consecutive_failures, state"
    )
    rows = fetch(increment, [])
    if not rows:  # the first failure ever: the row (closed) is made, then counted
        breaker_get()
        rows = fetch(increment, [])
    failures, state = int(rows[0][0]), rows[0][1]  # type: ignore[arg-type]
    if state == CircuitState.HALF_OPEN:
        breaker_transition(
            to=CircuitState.OPEN,
            actor="system",
            reason="A platform-key model call failed while half-open",
            only_from=(CircuitState.HALF_OPEN,),
        )
    elif state == CircuitState.CLOSED and failures >= settings.PLATFORM_CIRCUIT_FAILURE_THRESHOLD:
        breaker_transition(
            to=CircuitState.OPEN,
            actor="system",
            reason=f"{failures} consecutive platform-key model failures",
            only_from=(CircuitState.CLOSED,),
        )


def breaker_record_success() -> None:
    """A platform-key success resets the failure count and closes a half-open breaker.
    The usual case (closed, no failures) matches no row and writes nothing."""
    table = PlatformCircuitBreaker._meta.db_table
    rows = fetch(
        f"UPDATE {table} SET consecutive_failures = 0 WHERE id = 1 "
        "AND (consecutive_failures > 0 OR state = 'half_open') RETURNING state",
        [],
    )
    _close_after_half_open_success(rows[0][0] if rows else None)


def breaker_admit(*, locked: bool = False) -> str:
    """The breaker's say on a new platform-key job: ``PLATFORM_CIRCUIT_OPEN`` while it
    is open, else its state; while half-open the caller counts the active platform-key
    jobs for ``half_open_admit``. ``locked``: inside the creating transaction, with the
    breaker row locked, so half-open admissions are decided one at a time."""
    breaker = PlatformCircuitBreaker.objects.select_for_update().get(id=1) if locked else breaker_get()
    if breaker.state == CircuitState.OPEN:
        raise DomainError(ErrorCode.PLATFORM_CIRCUIT_OPEN, "The platform model key is paused by its circuit breaker")
    return breaker.state


def platform_admit() -> str:
    """The platform key's say on a new job, in one statement: the day's budgets first
    (their codes win while they are used up, though going over opened the breaker:
    contract §4 step 8), then the breaker (``PLATFORM_CIRCUIT_OPEN`` while open). Returns
    the breaker's state; a breaker never written yet is closed."""
    day = platform_day()
    ((tokens, cost, state),) = fetch(
        f"SELECT COALESCE(SUM(tokens_used), 0), COALESCE(SUM(cost_cents), 0), "
        f"(SELECT state FROM {PlatformCircuitBreaker._meta.db_table} WHERE id = 1) "
        f"FROM {PlatformDailyUsage._meta.db_table} WHERE day = %s",
        [day],
    )
    platform_budget_admit(_platform_usage(day, tokens, cost))
    if state == CircuitState.OPEN:
        raise DomainError(ErrorCode.PLATFORM_CIRCUIT_OPEN, "The platform model key is paused by its circuit breaker")
    return str(state or CircuitState.CLOSED)


def half_open_admit(*, active_platform_jobs: int) -> None:
    """While half-open, at most ``PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS`` platform-key jobs are active."""
    if active_platform_jobs >= settings.PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS:
        raise DomainError(
            ErrorCode.PLATFORM_CIRCUIT_HALF_OPEN,
            f"The circuit breaker is half-open: {active_platform_jobs} of "
            f"{settings.PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS} trial platform-key jobs are active",
        )


def platform_budget_admit(usage: PlatformUsage | None = None) -> None:
    """Refuse a new platform-key job while today's token or cost budget is used up."""
    usage = usage or platform_usage_today()
    if usage.tokens_used >= usage.token_budget:
        raise DomainError(ErrorCode.PLATFORM_TOKEN_BUDGET_EXCEEDED, "The platform's daily token budget is used up")
    if usage.cost_cents >= usage.cost_budget_cents:
        raise DomainError(ErrorCode.PLATFORM_COST_BUDGET_EXCEEDED, "The platform's daily cost budget is used up")


# --- the user's settings ------------------------------------------------------------------------------

_UNSET: object = object()


def ai_settings_update(
    *,
    user: AbstractBaseUser,
    by_staff: bool = False,
    ai_analysis_enabled: bool | object = _UNSET,
    timezone_name: str | object = _UNSET,
    default_api_key_mode: str | object = _UNSET,
    max_daily_ai_jobs: int | object = _UNSET,
    max_daily_token_budget: int | object = _UNSET,
) -> UserAiSettings:
    """Change a user's AI settings. The limits are staff's to change. (Turning AI
    analysis off also cancels the user's jobs: ``ai_jobs.services.ai_settings_update``.)

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


# Moving the quota from the day left to the day arrived in: three statements, each
# row locked before it is read, arrival first (as a result's tokens follow ``moved_to``
# to the day the user is on last, so the two never wait on each other in a circle).
# 1. the day arrived in is the user's again (a pointer of its own, from an earlier move, cleared);
_ARRIVE_SQL = (
    f"UPDATE {_USAGE_TABLE} SET moved_to = NULL, left_epoch = NULL, updated_at = %s "
    "WHERE user_id = %s AND local_date = %s"
)
# 2. the day left points to it and takes no job reserved before the new epoch (its rows
#    made even when nothing was counted yet, so a reservation racing the move meets them);
_LEAVE_SQL = (
    f"INSERT INTO {_USAGE_TABLE} "
    "(user_id, local_date, api_key_mode, job_count, tokens_used, cost_cents, moved_to, left_epoch, updated_at) "
    "VALUES (%s, %s, %s, 0, 0, 0, %s, %s, %s), (%s, %s, %s, 0, 0, 0, %s, %s, %s) "
    "ON CONFLICT (user_id, local_date, api_key_mode) DO UPDATE "
    "SET moved_to = EXCLUDED.moved_to, left_epoch = EXCLUDED.left_epoch, updated_at = EXCLUDED.updated_at"
)
# 3. each counter of the day arrived in becomes at least the day left's, per key mode.
_CARRY_SQL = (
    f"INSERT INTO {_USAGE_TABLE} (user_id, local_date, api_key_mode, job_count, tokens_used, cost_cents, updated_at) "
    f"SELECT user_id, %s, api_key_mode, job_count, tokens_used, cost_cents, %s FROM {_USAGE_TABLE} "
    "WHERE user_id = %s AND local_date = %s AND (job_count > 0 OR tokens_used > 0 OR cost_cents > 0) "
    "ON CONFLICT (user_id, local_date, api_key_mode) DO UPDATE SET "
    f"job_count = CASE WHEN EXCLUDED.job_count > {_USAGE_TABLE}.job_count "
    f"THEN EXCLUDED.job_count ELSE {_USAGE_TABLE}.job_count END, "
    f"tokens_used = CASE WHEN EXCLUDED.tokens_used > {_USAGE_TABLE}.tokens_used "
    f"THEN EXCLUDED.tokens_used ELSE {_USAGE_TABLE}.tokens_used END, "
    f"cost_cents = CASE WHEN EXCLUDED.cost_cents > {_USAGE_TABLE}.cost_cents "
    f"THEN EXCLUDED.cost_cents ELSE {_USAGE_TABLE}.cost_cents END, updated_at = EXCLUDED.updated_at"
)


def _quota_move(*, user_id: int, left: dt.date, arrived: dt.date, epoch: int, now: dt.datetime) -> None:
    """A change of timezone moved the user from the local day ``left`` to ``arrived``:
    the day arrived in counts at least the jobs, tokens and cost of the day left (the
    larger of the two, per key mode: exact when one already holds the other, as after
    any earlier move, and never more than one day's limit between two of the user's
    midnights, however often they move). A job reserved on the day left under an older
    epoch is refused and counted again on the new day (``quota_reserve_job``); tokens
    landing on it later follow ``moved_to``."""
    platform, own = ApiKeyMode.values
    fetch(_ARRIVE_SQL, [now, user_id, arrived])
    fetch(_LEAVE_SQL, [user_id, left, platform, arrived, epoch, now, user_id, left, own, arrived, epoch, now])
    fetch(_CARRY_SQL, [arrived, now, user_id, left])
