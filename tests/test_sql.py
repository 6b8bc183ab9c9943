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


def test_insert_rows_inserts_as_the_model_would_its_key_left_to_the_database_its_defaults_taken():
    from ai_jobs.models import AiInvocationLog
    from config.sql import insert_rows
    from tests.support.factories import JobFactory

    job = JobFactory()
    rows = [{"job_id": job.id, "attempt_no": 1, "runtime_instance_id": "runtime-1", "request_id": f"r{n}"}
            for n in range(2)]  # fmt: skip
    returned = insert_rows(AiInvocationLog, rows, suffix="RETURNING id, provider, total_tokens")
    assert len(returned) == 2 and all(row_id is not None for row_id, _, _ in returned)
    assert {(provider, tokens) for _, provider, tokens in returned} == {("deepseek", 0)}
    stored = AiInvocationLog.objects.filter(job_id=job.id).order_by("request_id")
    assert [(log.request_id, log.model_name, log.created_at is not None) for log in stored] == [
        ("r0", "", True),
        ("r1", "", True),
    ]
