"""The operator's day: the date in ``PLATFORM_TIMEZONE`` (default UTC). The platform
budget's day and model-asynch's daily statistics turn at its midnight; a user's quota
turns at the midnight of the user's own time zone."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone


def platform_zone() -> ZoneInfo:
    return ZoneInfo(settings.PLATFORM_TIMEZONE)  # zoneinfo caches each zone it loads


def platform_day(now: dt.datetime | None = None) -> dt.date:
    """The platform's calendar day at ``now`` (default: now)."""
    return (now or timezone.now()).astimezone(platform_zone()).date()


def earliest_day(now: dt.datetime | None = None) -> dt.date:
    """The earliest calendar date anywhere on Earth at ``now`` (UTC-12): a day a
    counter keeps that is before this is over for every time zone."""
    return ((now or timezone.now()).astimezone(dt.UTC) - dt.timedelta(hours=12)).date()
