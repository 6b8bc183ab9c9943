"""The operator's day: ``PLATFORM_TIMEZONE`` (default UTC) decides the platform budget's
day, the ``aijobs_platform_*_today`` gauges and model-asynch's daily statistics; a
user's quota day stays the user's own. In Asia/Shanghai (UTC+8) the day turns at
16:00 UTC, so 23:30 UTC is already the next day there. A name that is no IANA time
zone stops every process at start, naming the setting."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from asynch import services as asynch_services
from asynch.models import AsynchModelStat
from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import ApiKeyMode, PlatformDailyUsage, UserAiUsage
from tests.support.asynch_fixtures import make_model, model_server_fixture, run_queue, tenant_client  # noqa: F401
from tests.support.ops import Scrape
from tests.support.user_api import Learner

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent
LATE_EVENING_UTC = dt.datetime(2026, 3, 1, 23, 30, tzinfo=dt.UTC)  # 07:30 on 2 March in Shanghai
MARCH_1, MARCH_2 = dt.date(2026, 3, 1), dt.date(2026, 3, 2)


@pytest.fixture
def at(monkeypatch):
    def set_clock(instant: dt.datetime) -> None:
        monkeypatch.setattr(timezone, "now", lambda: instant)

    return set_clock


@pytest.fixture
def shanghai(settings):
    settings.PLATFORM_TIMEZONE = "Asia/Shanghai"


def _platform_days() -> dict[dt.date, int]:
    days: dict[dt.date, int] = {}
    for day, tokens in PlatformDailyUsage.objects.values_list("day", "tokens_used"):
        days[day] = days.get(day, 0) + tokens
    return days


@pytest.mark.embedded
def test_platform_usage_at_2330_utc_lands_on_the_next_shanghai_day(shanghai, at):
    at(LATE_EVENING_UTC)
    quotas.platform_usage_add(tokens=7, cost_cents=Decimal(1))
    assert _platform_days() == {MARCH_2: 7}
    today = quota_selectors.platform_usage_today()
    assert (today.day, today.tokens_used) == (MARCH_2, 7)


@pytest.mark.embedded
@pytest.mark.parametrize(
    ("instant", "day"),
    [
        (dt.datetime(2026, 3, 1, 15, 59, 59, tzinfo=dt.UTC), MARCH_1),
        (dt.datetime(2026, 3, 1, 16, 0, tzinfo=dt.UTC), MARCH_2),  # midnight in Shanghai
    ],
)
def test_the_shanghai_platform_day_turns_at_1600_utc(shanghai, at, instant, day):
    at(instant)
    assert quota_selectors.platform_day() == day


@pytest.mark.embedded
def test_the_default_platform_day_is_the_utc_date(at):
    at(LATE_EVENING_UTC)
    quotas.platform_usage_add(tokens=3, cost_cents=Decimal(0))
    assert _platform_days() == {MARCH_1: 3}


@pytest.mark.embedded
def test_a_users_quota_day_stays_their_own_while_the_platform_day_is_shanghais(shanghai, at):
    at(LATE_EVENING_UTC)
    learner = Learner()  # time zone UTC: still 1 March for them
    assert learner.job().status_code == 201
    usage = UserAiUsage.objects.get(user=learner.user)
    quotas.usage_record_calls(
        user_id=learner.user.pk,
        quota_date=usage.local_date,
        api_key_mode=ApiKeyMode.PLATFORM_KEY,
        total_tokens=11,
        cost_cents=Decimal(0),
    )
    usage.refresh_from_db()
    assert (usage.local_date, usage.job_count, usage.tokens_used) == (MARCH_1, 1, 11)
    assert _platform_days() == {MARCH_2: 11}


def test_the_platform_gauges_read_the_shanghai_day(shanghai, at):
    PlatformDailyUsage.objects.create(day=MARCH_1, shard=0, tokens_used=500, cost_cents=5)
    PlatformDailyUsage.objects.create(day=MARCH_2, shard=0, tokens_used=40, cost_cents=2)
    at(LATE_EVENING_UTC)
    response = Client().get("/metrics")
    assert response.status_code == 200
    scrape = Scrape.parse(response.content.decode())
    assert scrape.value("aijobs_platform_tokens_today") == 40
    assert scrape.value("aijobs_platform_cost_cents_today") == 2


@pytest.mark.embedded
def test_model_asynch_calls_at_2330_utc_count_on_the_next_shanghai_day(shanghai):
    biz = tenant_client("biz")
    asynch_services.stat_count_call(tenant_id=biz.tenant.id, creator="u1", model_name="m1", now=LATE_EVENING_UTC)
    assert list(AsynchModelStat.objects.values_list("day", "request_count")) == [(MARCH_2, 1)]
    listed = biz.get("/model/stats", {"day": MARCH_2.isoformat()}).json()["results"]
    assert [row["requestCount"] for row in listed] == [1]


def test_the_workers_claim_counts_calls_on_the_shanghai_day(shanghai, at, model_server, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    settings.VAR_DIR = tmp_path
    settings.ASYNCH_SEMAPHORE_REDIS_URL = ""
    at(LATE_EVENING_UTC)
    make_model(base_url=model_server.url, route="/v1/chat")
    biz = tenant_client("biz")
    assert biz.create_task("model-service", {"prompt": "hi"}).status_code == 201
    assert run_queue() == ["succeeded"]
    assert list(AsynchModelStat.objects.values_list("day", "request_count")) == [(MARCH_2, 1)]


@pytest.mark.parametrize("value", ["Mars/Olympus_Mons", "../etc/passwd", ""])
def test_a_platform_timezone_that_is_no_iana_name_stops_the_process_naming_it(value, tmp_path):
    env = {**os.environ, "DEBUG": "true", "VAR_DIR": str(tmp_path), "PLATFORM_TIMEZONE": value}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "PLATFORM_TIMEZONE" in done.stderr and "IANA time zone" in done.stderr, done.stderr[-2000:]
