"""What retention deletes of the daily counters: ``AI_COUNTER_RETENTION_DAYS`` (400)
after their day, as ``config.retention.Sweep`` kinds that ``ops.retention`` runs:

- ``userUsage``: a user's daily usage, once its day is that long ago in every time
  zone (the earliest date on Earth is the reference), so no user's current day, the
  one their quota reads, is ever touched;
- ``platformUsage``: the platform's daily usage (its shard rows), by the platform's
  day (``PLATFORM_TIMEZONE``);
- ``breakerEvents``: the circuit breaker's history, made that long ago.

Each reads from an index on its time field: ``quota_usage_local_date``, the
``(day, shard)`` key, ``quota_breaker_event_created``."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import QuerySet

from config.days import earliest_day, platform_day
from config.retention import Sweep
from quotas.models import CircuitBreakerEvent, PlatformDailyUsage, UserAiUsage


def counter_retention() -> dt.timedelta:
    return dt.timedelta(days=settings.AI_COUNTER_RETENTION_DAYS)


def user_usage_due(now: dt.datetime) -> QuerySet[UserAiUsage]:
    return UserAiUsage.objects.filter(local_date__lt=earliest_day(now) - counter_retention())


def platform_usage_due(now: dt.datetime) -> QuerySet[PlatformDailyUsage]:
    return PlatformDailyUsage.objects.filter(day__lt=platform_day(now) - counter_retention())


def breaker_events_due(now: dt.datetime) -> QuerySet[CircuitBreakerEvent]:
    return CircuitBreakerEvent.objects.filter(created_at__lt=now - counter_retention())


USER_USAGE = Sweep(kind="userUsage", due=user_usage_due, order_by="local_date")
PLATFORM_USAGE = Sweep(kind="platformUsage", due=platform_usage_due, order_by="day")
BREAKER_EVENTS = Sweep(kind="breakerEvents", due=breaker_events_due, order_by="created_at")
SWEEPS = [USER_USAGE, PLATFORM_USAGE, BREAKER_EVENTS]
