"""A user who flips their timezone back and forth while jobs are created and results
land, with real threads against PostgreSQL: the days they flip between never give
them more jobs than one day's limit, and the day they end on holds every token."""

from __future__ import annotations

import threading
import time
from collections import Counter
from decimal import Decimal

import pytest
from django.db import connection, transaction

from ai_jobs import services as job_services
from ai_jobs.models import AiRuntimeJob
from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import UserAiSettings, UserAiUsage
from tests.support.concurrency import run_together
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# Fourteen hours east and twelve west of UTC: 26 hours apart, two dates at any instant.
EAST, WEST = "Pacific/Kiritimati", "Etc/GMT+12"
LIMIT = 6
CREATORS = 8


def _flipping(learner: Learner, flips: list[str], *, stop: threading.Event, most: int = 10_000) -> threading.Thread:
    """A thread that changes the learner's timezone EAST, WEST, EAST... until ``stop``
    is set or it made ``most`` changes."""

    def flip() -> None:
        try:
            zone = EAST
            while not stop.is_set() and len(flips) < most:
                job_services.ai_settings_update(user=learner.user, timezone_name=zone)
                flips.append(zone)
                zone = WEST if zone == EAST else EAST
                time.sleep(0.002)
        finally:
            connection.close()

    return threading.Thread(target=flip)


def _code(response) -> str:
    return "created" if response.status_code == 201 else response.json()["error"]["code"]


def test_flipping_timezone_while_creating_jobs_never_gives_more_than_the_days_limit():
    learner = Learner()
    UserAiSettings.objects.filter(user=learner.user).update(max_daily_ai_jobs=LIMIT, timezone=WEST)
    stop, flips = threading.Event(), []
    flipper = _flipping(learner, flips, stop=stop)
    flipper.start()
    try:
        while len(flips) < 2:  # flipping already when the first request comes
            time.sleep(0.001)
        before = len(flips)
        outcomes = Counter(
            code
            for codes in run_together(CREATORS, lambda i: [_code(learner.twin().job()) for _ in range(5)])
            for code in codes
        )
        during = len(flips) - before
    finally:
        stop.set()
        flipper.join(timeout=60)
    assert during >= 2, flips  # the flips did meet the creations
    assert set(outcomes) <= {"created", "DAILY_JOB_LIMIT_EXCEEDED"}, outcomes
    jobs = AiRuntimeJob.objects.filter(user=learner.user)
    assert outcomes["created"] == jobs.count() == LIMIT, outcomes
    # The day the user is on holds every job, wherever each was counted.
    settings = quota_selectors.ai_settings_get(user=learner.user)
    today = quota_selectors.usage_of_day(user_id=learner.user.pk, day=quota_selectors.local_date(ai_settings=settings))
    assert today["platform_key"].job_count == LIMIT
    assert {job.quota_date for job in jobs} <= set(
        UserAiUsage.objects.filter(user=learner.user, job_count__gt=0).values_list("local_date", flat=True)
    )


@pytest.mark.parametrize("mode", ["platform_key", "user_deepseek_key"])
def test_flipping_timezone_while_results_land_leaves_every_token_on_the_day_the_user_is_on(mode):
    learner = Learner()
    UserAiSettings.objects.filter(user=learner.user).update(timezone=WEST)
    job_day = quota_selectors.local_date(ai_settings=quota_selectors.ai_settings_get(user=learner.user))

    def land(count: int) -> None:
        for _ in range(count):
            with transaction.atomic():  # as a result is counted, in its own transaction
                quotas.usage_record_result(user_id=learner.user.pk, quota_date=job_day, api_key_mode=mode,
                                           total_tokens=7, cost_cents=Decimal("0.5"))  # fmt: skip

    # Results of jobs counted on the WEST day land while the user flips (nine times, so
    # they end up EAST), then more land after the last flip.
    flips: list[str] = []
    flipper = _flipping(learner, flips, stop=threading.Event(), most=9)
    flipper.start()
    try:
        run_together(6, lambda i: land(10))
    finally:
        flipper.join(timeout=60)
    land(10)
    assert flips[-1] == EAST and len(flips) == 9
    settings = quota_selectors.ai_settings_get(user=learner.user)
    today = quota_selectors.local_date(ai_settings=settings)
    assert today != job_day
    usage = quota_selectors.usage_of_day(user_id=learner.user.pk, day=today)[mode]
    assert (usage.tokens_used, usage.cost_cents) == (70 * 7, Decimal("35.0000"))
