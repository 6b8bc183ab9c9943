"""When the outbox tries a delivery again (``delivery.services.outbox``): each sender
has a schedule, and a receiver's ``Retry-After`` is read here."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from django.utils import timezone

from config.rates import parse_intervals


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff from ``base`` seconds with full jitter (each delay drawn
    between half and all of its doubling), at most ``max_attempts`` tries; a receiver's
    ``Retry-After`` is honoured when it asks for longer."""

    base: float
    max_attempts: int
    cap: float = 3600.0

    def delay(self, attempts: int, retry_after: float | None = None) -> float | None:
        if attempts >= self.max_attempts:
            return None
        ceiling = min(self.cap, self.base * 2 ** max(0, attempts - 1))
        return max(random.uniform(ceiling / 2, ceiling), retry_after or 0.0)


@dataclass(frozen=True)
class FixedSchedule:
    """Tried once, then once after each interval (seconds), then failed."""

    intervals: tuple[float, ...]

    def delay(self, attempts: int, retry_after: float | None = None) -> float | None:
        return self.intervals[attempts - 1] if 1 <= attempts <= len(self.intervals) else None


def schedule_parse(text: str) -> FixedSchedule:
    """``"5s,5m,30m,2h"`` as a ``FixedSchedule``; a bare number is seconds."""
    return FixedSchedule(parse_intervals(text))


# A receiver's Retry-After is a value from outside: bounded, so no date arithmetic overflows.
MAX_RETRY_AFTER_SECONDS = 7 * 86400


def retry_after_seconds(value: str | None, *, now: dt.datetime | None = None) -> float | None:
    """A ``Retry-After`` header's wait in seconds (delay-seconds or an HTTP date), at most
    ``MAX_RETRY_AFTER_SECONDS``, or ``None`` for none or one that cannot be read."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return min(float(value), MAX_RETRY_AFTER_SECONDS)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return min(max(0.0, (when - (now or timezone.now())).total_seconds()), MAX_RETRY_AFTER_SECONDS)
