"""Counters do not grow forever: users' and the platform's daily usage, model-asynch's
daily statistics and the breaker's events go ``AI_COUNTER_RETENTION_DAYS`` (400) after
their day, through ``prune_data`` in bounded batches like the rest of retention; the
day a quota reads is never touched. And ``clean_asynch_tasks`` runs model-asynch's
cleaner once, on demand."""

from __future__ import annotations

import datetime as dt
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from asynch import services as asynch_services
from asynch.models import AsynchModelStat, AsynchTask, TaskState
from config.days import platform_day
from ops import retention
from quotas.models import ApiKeyMode, CircuitBreakerEvent, PlatformDailyUsage, UserAiUsage
from tests.support.asynch_fixtures import make_model, tenant_client
from tests.support.factories import UserFactory
from tests.support.retention import counters_aged

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent
COUNTERS = ("userUsage", "platformUsage", "asynchStats", "breakerEvents")


def _left() -> dict[str, int]:
    return {
        "userUsage": UserAiUsage.objects.count(),
        "platformUsage": PlatformDailyUsage.objects.count(),
        "asynchStats": AsynchModelStat.objects.count(),
        "breakerEvents": CircuitBreakerEvent.objects.count(),
    }


@pytest.mark.embedded
def test_counters_older_than_400_days_go_and_a_year_of_them_stays(django_capture_on_commit_callbacks):
    counters_aged(days=[0, 1, 365, 399, 402, 403, 800])
    counted = retention.data_prune(dry_run=True)
    assert {kind: sum(counted.kinds[kind].values()) for kind in COUNTERS} == dict.fromkeys(COUNTERS, 3)
    assert _left() == dict.fromkeys(COUNTERS, 7)  # a dry run deletes nothing
    with django_capture_on_commit_callbacks(execute=True):
        report = retention.data_prune()
    assert {kind: sum(report.kinds[kind].values()) for kind in COUNTERS} == dict.fromkeys(COUNTERS, 3)
    assert _left() == dict.fromkeys(COUNTERS, 4)
    oldest = platform_day() - dt.timedelta(days=399)
    assert min(UserAiUsage.objects.values_list("local_date", flat=True)) == oldest
    assert min(PlatformDailyUsage.objects.values_list("day", flat=True)) == oldest
    assert min(AsynchModelStat.objects.values_list("day", flat=True)) == oldest


def test_the_setting_decides_and_the_command_names_each_kind(settings):
    settings.AI_COUNTER_RETENTION_DAYS = 30
    counters_aged(days=[0, 29, 32, 45])
    out = io.StringIO()
    call_command("prune_data", stdout=out)
    printed = out.getvalue()
    assert "daily counters after 30 d" in printed
    for kind, table in (
        ("userUsage", "user ai usages"),
        ("platformUsage", "platform daily usages"),
        ("asynchStats", "daily model statistics"),
        ("breakerEvents", "circuit breaker events"),
    ):
        assert f"{kind}: deleted 2 ({table} 2)" in printed, printed
    assert _left() == dict.fromkeys(COUNTERS, 2)


@pytest.mark.embedded
def test_a_backlog_of_counters_goes_in_bounded_batches(settings):
    settings.RETENTION_BATCH_SIZE = 2
    counters_aged(days=[500 + n for n in range(5)])
    batches: dict[str, list[int]] = {}
    report = retention.data_prune(progress=lambda kind, deleted, n: batches.setdefault(kind, []).append(n))
    for kind in COUNTERS:
        assert batches[kind] == [1, 2, 3], kind  # 2 + 2 + 1 rows
        assert sum(report.kinds[kind].values()) == 5
    assert _left() == dict.fromkeys(COUNTERS, 0)


@pytest.mark.embedded
def test_no_current_day_anywhere_is_touched_even_with_one_day_of_retention(settings):
    """10:00 UTC on 1 March: still 28 February in UTC-12, already 1 March (18:00) in
    Shanghai, the platform's zone. With a day of retention, 28 February's user
    counters (the current day of the earliest zone) and the platform's yesterday stay."""
    settings.AI_COUNTER_RETENTION_DAYS = 1
    settings.PLATFORM_TIMEZONE = "Asia/Shanghai"
    now = dt.datetime(2026, 3, 1, 10, 0, tzinfo=dt.UTC)
    user = UserFactory()
    for day in (dt.date(2026, 2, 26), dt.date(2026, 2, 27), dt.date(2026, 2, 28), dt.date(2026, 3, 1)):
        UserAiUsage.objects.create(user=user, local_date=day, api_key_mode=ApiKeyMode.PLATFORM_KEY, job_count=1)
        PlatformDailyUsage.objects.create(day=day, shard=0, tokens_used=10)
    retention.data_prune(now=now)
    assert sorted(UserAiUsage.objects.values_list("local_date", flat=True)) == [
        dt.date(2026, 2, 27),
        dt.date(2026, 2, 28),
        dt.date(2026, 3, 1),
    ]
    assert sorted(PlatformDailyUsage.objects.values_list("day", flat=True)) == [
        dt.date(2026, 2, 28),
        dt.date(2026, 3, 1),
    ]


@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_counter_retention_below_one_day_stops_the_process_naming_it(value, tmp_path):
    env = {**os.environ, "DEBUG": "true", "VAR_DIR": str(tmp_path), "AI_COUNTER_RETENTION_DAYS": value}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0 and "AI_COUNTER_RETENTION_DAYS" in done.stderr, done.stderr[-2000:]


# --- model-asynch's cleaner, on demand ---------------------------------------------------------------


@pytest.mark.embedded
@pytest.mark.parametrize("enabled", [True, False])
def test_clean_asynch_tasks_runs_the_cleaner_once_even_while_its_periodic_runs_are_off(settings, tmp_path, enabled):
    settings.MEDIA_ROOT = tmp_path
    settings.ASYNCH_CLEANER_ENABLED = enabled
    settings.ASYNCH_TASK_TIMEOUT_SECONDS = 60
    make_model(retry_times=0)
    biz = tenant_client("biz")
    stuck, downloaded, fresh = (biz.create_task("model-service").json()["taskId"] for _ in range(3))
    past = timezone.now() - dt.timedelta(seconds=120)
    AsynchTask.objects.filter(id=stuck).update(enqueue_at=past)
    AsynchTask.objects.filter(id=downloaded).update(state=TaskState.DOWNLOADED, finished_at=past, expire_at=past)
    out = io.StringIO()
    call_command("clean_asynch_tasks", stdout=out)
    assert out.getvalue().strip() == "deletedDownloaded=1, failedStuck=1"
    assert AsynchTask.objects.get(id=stuck).state == TaskState.FAILED
    assert not AsynchTask.objects.filter(id=downloaded).exists()
    assert AsynchTask.objects.get(id=fresh).state == TaskState.QUEUED
    again = io.StringIO()
    call_command("clean_asynch_tasks", stdout=again)
    assert again.getvalue().strip() == "nothing to clean"
    # The beat's task is the same run, and it honours the switch.
    assert bool(asynch_services.tasks_clean(now=timezone.now() + dt.timedelta(days=1))) is enabled
