"""The settings' notation for a rate, ``"300/min"``: a count per period. Every throttle
reads its rate with it (``quotas.throttles``, ``config.auth_failures``)."""

from __future__ import annotations

_PERIODS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
}


def parse_rate(rate: str) -> tuple[int, int]:
    """``"300/min"`` → (300, 60)."""
    count, _, period = rate.partition("/")
    return int(count), _PERIODS[period.strip().lower()]
