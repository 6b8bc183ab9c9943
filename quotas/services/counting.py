"""The one write that counts tokens and cost: on a user's day, on a shard of the
platform's day, and for a platform-key success the breaker's consecutive failures
started again. On PostgreSQL it is one statement (``queries.COUNT_USAGE``, data-modifying
CTEs); SQLite, which has none, makes the same moves with the ORM (``_with_orm``). SQLite
has one writer at a time: from a transaction's first write (an ``UPDATE`` that finds no
row included) to its commit no other connection writes, so a row the update did not find
is made by the insert after it, and a read after a write sees what it wrote.
``tests/test_usage.py`` runs both on PostgreSQL and compares what they leave."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import F, Q, QuerySet, Sum
from django.utils import timezone

from config.days import platform_day
from config.sql import fetch
from quotas import queries
from quotas.models import (
    PLATFORM_USAGE_SHARDS,
    CircuitState,
    PlatformCircuitBreaker,
    PlatformDailyUsage,
    UserAiUsage,
)
from quotas.selectors import PlatformUsage, as_date, platform_usage


def platform_shard() -> int:
    """The shard a count goes to: any, so concurrent results rarely meet on one row."""
    return random.randrange(PLATFORM_USAGE_SHARDS)


@dataclass(frozen=True)
class Counted:
    moved_to: dt.date | None  # the day a change of timezone moved the user to from the day counted on
    platform: PlatformUsage | None  # the platform's day after the count, when it counted there
    breaker_state: str | None  # the breaker's state when a success reset it; None: nothing to reset


@dataclass(frozen=True)
class Count:
    """What to count: ``tokens`` and ``cost_cents`` on user ``user_id``'s ``day`` (no
    user: none), on the platform's day with ``platform``, and with ``success`` the
    breaker's failures start again."""

    user_id: int | None
    day: dt.date | None
    api_key_mode: str
    tokens: int
    cost_cents: Decimal
    platform: bool
    success: bool = False


def usage_count(count: Count) -> Counted:
    write = _in_one_statement if connection.vendor == "postgresql" else _with_orm
    return write(count, now=timezone.now(), today=platform_day(), shard=platform_shard())


def user_day_count(*, user_id: int, day: dt.date, api_key_mode: str, tokens: int, cost_cents: Decimal) -> Counted:
    """Count on the user's day only."""
    return usage_count(
        Count(user_id=user_id, day=day, api_key_mode=api_key_mode, tokens=tokens, cost_cents=cost_cents, platform=False)
    )


def _in_one_statement(count: Count, *, now: dt.datetime, today: dt.date, shard: int) -> Counted:
    ((tokens, cost, state, moved_to),) = fetch(
        queries.COUNT_USAGE,
        {
            "user_id": count.user_id,
            "day": count.day,
            "api_key_mode": count.api_key_mode,
            "tokens": count.tokens,
            "cost_cents": count.cost_cents,
            "platform": count.platform,
            "success": count.success,
            "today": today,
            "shard": shard,
            "now": now,
        },
    )
    return Counted(
        moved_to=None if moved_to is None else as_date(moved_to),
        platform=platform_usage(day=today, tokens=tokens, cost=cost) if count.platform else None,
        breaker_state=state,
    )


def _add(rows: QuerySet[Any], create: dict[str, Any], *, tokens: int, cost_cents: Decimal, now: dt.datetime) -> bool:
    """Add to the one row ``rows`` selects, or make it; whether it existed."""
    if rows.update(tokens_used=F("tokens_used") + tokens, cost_cents=F("cost_cents") + cost_cents, updated_at=now):
        return True
    rows.model.objects.create(**create, tokens_used=tokens, cost_cents=cost_cents)
    return False


def _with_orm(count: Count, *, now: dt.datetime, today: dt.date, shard: int) -> Counted:
    moved_to = state = platform = None
    if count.user_id is not None:
        day = {"user_id": count.user_id, "local_date": count.day, "api_key_mode": count.api_key_mode}
        if _add(UserAiUsage.objects.filter(**day), day, tokens=count.tokens, cost_cents=count.cost_cents, now=now):
            moved_to = UserAiUsage.objects.filter(**day).values_list("moved_to", flat=True).get()
    if count.success and PlatformCircuitBreaker.objects.filter(
        Q(consecutive_failures__gt=0) | Q(state=CircuitState.HALF_OPEN), id=1
    ).update(consecutive_failures=0):
        state = PlatformCircuitBreaker.objects.values_list("state", flat=True).get(id=1)
    if count.platform:
        row = {"day": today, "shard": shard}
        _add(PlatformDailyUsage.objects.filter(**row), row, tokens=count.tokens, cost_cents=count.cost_cents, now=now)
        sums = PlatformDailyUsage.objects.filter(day=today).aggregate(tokens=Sum("tokens_used"), cost=Sum("cost_cents"))
        platform = platform_usage(day=today, tokens=sums["tokens"] or 0, cost=sums["cost"] or 0)
    return Counted(moved_to=moved_to, platform=platform, breaker_state=state)
