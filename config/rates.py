"""The settings' notations for a rate, ``"300/min"`` (a count per period: every throttle
reads its rate with it, ``quotas.throttles`` and ``config.auth_failures``), and for a
schedule, ``"5s,5m,30m,2h"`` (the intervals between a delivery's tries,
``WEBHOOK_RETRY_SCHEDULE``). The settings read every one of them as they load, so a
value that cannot be read stops a process from starting, not a request or a retry later.
And the count of a rate's window kept in a cache of the process's own, for both
throttles' fallback when their shared store cannot be reached."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the settings import this module: nothing of Django's at run time
    from django.core.cache import BaseCache

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


@lru_cache(maxsize=64)  # read on every throttled request: a handful of distinct texts
def parse_rate(rate: str) -> tuple[int, int]:
    """``"300/min"`` → (300, 60); ValueError for anything else."""
    count, _, period = rate.partition("/")
    unit = _PERIODS.get(period.strip().lower())
    if unit is None or not count.strip().isdigit() or int(count) < 1:
        raise ValueError(f"{rate!r} is not a rate such as 300/min (a count of 1 or more per s, min, hour or day)")
    return int(count), unit


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_intervals(text: str) -> tuple[float, ...]:
    """``"5s,5m,30m,2h"`` → (5, 300, 1800, 7200) seconds; a bare number is seconds;
    ValueError for anything else."""
    intervals = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", part)
        if match is None:
            raise ValueError(f"{part!r} is not an interval such as 5s, 5m, 2h")
        intervals.append(float(match.group(1)) * _UNITS[match.group(2) or "s"])
    return tuple(intervals)


def count_in(store: BaseCache, key: str, ttl: int) -> int:
    """The window ``key``'s count after one more, in ``store`` (a process's own cache)."""
    store.add(key, 0, timeout=ttl)
    try:
        return store.incr(key)
    except ValueError:  # the window's key expired between add and incr
        store.add(key, 1, timeout=ttl)
        return 1
