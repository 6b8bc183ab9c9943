"""``config.sql``: statements written out whole, run on either database."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from config.sql import execute, fetch
from quotas.models import PlatformDailyUsage

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def test_named_parameters_bind_by_name_on_either_database():
    day = timezone.now().date()
    inserted = execute(
        "INSERT INTO quota_platform_daily_usage (day, shard, tokens_used, cost_cents, updated_at) "
        "VALUES (%(day)s, %(shard)s, %(tokens)s, %(tokens)s, %(now)s)",
        {"day": day, "shard": 3, "tokens": 7, "now": timezone.now()},
    )
    assert inserted == 1
    rows = fetch(
        "SELECT shard, tokens_used FROM quota_platform_daily_usage WHERE day = %(day)s AND shard = %(shard)s",
        {"shard": 3, "day": day},
    )
    assert rows == [(3, 7)]
    usage = PlatformDailyUsage.objects.get(day=day, shard=3)
    assert (usage.tokens_used, int(usage.cost_cents)) == (7, 7)
    assert isinstance(usage.updated_at, dt.datetime)
