"""The user's day as the quotas count it: jobs reserved against the day's limits, each
key mode apart; a result's and failed calls' tokens and cost on the day the job was
counted on, and for the platform key on the platform's day too. On PostgreSQL a
result is counted in one statement; the ORM's moves the embedded default (SQLite)
makes give the same counters. (A change of timezone carrying the day:
``test_quota_timezones.py``.)"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from config.errors import DomainError, ErrorCode
from quotas import queries
from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import (
    CircuitBreakerEvent,
    CircuitState,
    PlatformCircuitBreaker,
    PlatformDailyUsage,
    UserAiSettings,
    UserAiUsage,
)
from quotas.services import counting
from tests.support.api import RuntimeClient, error_code
from tests.support.breaker import run_and_succeed
from tests.support.factories import UserFactory
from tests.support.user_api import Learner

pytestmark = pytest.mark.django_db


def _limited(*, jobs: int = 20, tokens: int = 100_000, zone: str = "UTC") -> UserAiSettings:
    user = UserFactory()
    quota_selectors.ai_settings_get(user=user)
    UserAiSettings.objects.filter(user=user).update(
        max_daily_ai_jobs=jobs, max_daily_token_budget=tokens, timezone=zone
    )
    return UserAiSettings.objects.get(user=user)


def _counted(ai_settings: UserAiSettings, day: dt.date) -> dict[str, tuple[int, int]]:
    rows = UserAiUsage.objects.filter(user_id=ai_settings.user_id, local_date=day)
    return {row.api_key_mode: (row.job_count, row.tokens_used) for row in rows}


# --- through the runtime and user APIs --------------------------------------------------------------


@pytest.mark.embedded
def test_a_result_counts_tokens_for_the_user_and_the_platform_and_going_over_budget_opens_it(settings):
    learner, runtime = Learner(), RuntimeClient("runtime-1")
    settings.PLATFORM_DAILY_TOKEN_BUDGET = 900
    run_and_succeed(learner, runtime)
    counted = UserAiUsage.objects.get(user=learner.user, api_key_mode="platform_key")
    assert (counted.job_count, counted.tokens_used, counted.cost_cents) == (1, 500, Decimal("1.5"))
    assert quota_selectors.platform_usage_today().tokens_used == 500
    assert quota_selectors.breaker_get().state == CircuitState.CLOSED
    run_and_succeed(learner, runtime)
    assert quota_selectors.platform_usage_today().tokens_used == 1000
    assert quota_selectors.breaker_get().state == CircuitState.OPEN
    assert "token budget" in CircuitBreakerEvent.objects.get().reason
    # While today's budget is used up its own code answers, not the breaker's.
    assert error_code(learner.job()) == "PLATFORM_TOKEN_BUDGET_EXCEEDED"


@pytest.mark.embedded
def test_user_key_results_are_not_counted_against_the_platform():
    learner, runtime = Learner(), RuntimeClient("runtime-1")
    credential = learner.credential()
    run_and_succeed(learner, runtime, apiKeyMode="user_deepseek_key", credentialId=credential)
    assert not PlatformDailyUsage.objects.exists()
    assert UserAiUsage.objects.get(user=learner.user, api_key_mode="user_deepseek_key").tokens_used == 500


# --- reading the day -----------------------------------------------------------------------------------


@pytest.mark.embedded
def test_the_quota_state_is_the_settings_and_the_users_own_day_in_one_statement():
    ai_settings = _limited(zone="Asia/Shanghai")
    now = dt.datetime(2099, 11, 30, 20, 0, tzinfo=dt.UTC)  # 1 December in Shanghai
    for day, jobs in ((dt.date(2099, 11, 30), 5), (dt.date(2099, 12, 1), 2)):
        UserAiUsage.objects.create(user_id=ai_settings.user_id, local_date=day, api_key_mode="platform_key",
                                   job_count=jobs, tokens_used=jobs * 10, cost_cents=Decimal("0.25"))  # fmt: skip
    with CaptureQueriesContext(connection) as captured:
        state = quota_selectors.quota_state_get(user_id=ai_settings.user_id, now=now)
    assert len(captured.captured_queries) == 1
    assert state.day == dt.date(2099, 12, 1) and state.ai_settings.timezone == "Asia/Shanghai"
    assert state.ai_settings.max_daily_ai_jobs == 20 and state.ai_settings.quota_epoch == 0
    platform, own = state.usage["platform_key"], state.usage["user_deepseek_key"]
    assert (platform.job_count, platform.tokens_used, platform.cost_cents) == (2, 20, Decimal("0.2500"))
    assert (own.job_count, own.tokens_used, own.cost_cents) == (0, 0, Decimal(0))


def test_the_settings_statement_selects_every_field_of_the_settings_in_the_models_order():
    # A field the statement missed would be read with one more statement on every POST /ai/jobs.
    assert tuple(field.attname for field in UserAiSettings._meta.concrete_fields) == queries.SETTINGS_FIELDS


# --- reserving a job -----------------------------------------------------------------------------------


@pytest.mark.embedded
def test_jobs_are_reserved_up_to_the_days_limit_each_key_mode_apart():
    ai_settings = _limited(jobs=2)
    day = quota_selectors.local_date(ai_settings=ai_settings)
    for _ in range(2):
        assert quotas.quota_reserve_job(ai_settings=ai_settings, api_key_mode="platform_key", day=day) == day
    with pytest.raises(DomainError) as refused:
        quotas.quota_reserve_job(ai_settings=ai_settings, api_key_mode="platform_key", day=day)
    assert refused.value.code == ErrorCode.DAILY_JOB_LIMIT_EXCEEDED
    assert quotas.quota_reserve_job(ai_settings=ai_settings, api_key_mode="user_deepseek_key", day=day) == day
    assert _counted(ai_settings, day) == {"platform_key": (2, 0), "user_deepseek_key": (1, 0)}


@pytest.mark.embedded
def test_a_day_whose_tokens_are_used_up_takes_no_more_jobs():
    ai_settings = _limited(tokens=100)
    day = quota_selectors.local_date(ai_settings=ai_settings)
    quotas.quota_reserve_job(ai_settings=ai_settings, api_key_mode="platform_key", day=day)
    quotas.usage_record_calls(user_id=ai_settings.user_id, quota_date=day, api_key_mode="platform_key",
                              total_tokens=100, cost_cents=Decimal(0))  # fmt: skip
    with pytest.raises(DomainError) as refused:
        quotas.quota_check(ai_settings=ai_settings, api_key_mode="platform_key", day=day)
    assert refused.value.code == ErrorCode.DAILY_TOKEN_BUDGET_EXCEEDED
    with pytest.raises(DomainError):
        quotas.quota_reserve_job(ai_settings=ai_settings, api_key_mode="platform_key", day=day)
    assert _counted(ai_settings, day) == {"platform_key": (1, 100)}


# --- counting calls and results ---------------------------------------------------------------------


@pytest.mark.embedded
def test_failed_calls_count_for_the_user_and_for_the_platform_key_on_the_platforms_day():
    ai_settings = _limited()
    day = dt.date(2099, 1, 2)  # the job's day, whatever today is
    for mode in ("platform_key", "user_deepseek_key"):
        quotas.usage_record_calls(user_id=ai_settings.user_id, quota_date=day, api_key_mode=mode, total_tokens=40,
                                  cost_cents=Decimal("0.5"))  # fmt: skip
    assert _counted(ai_settings, day) == {"platform_key": (0, 40), "user_deepseek_key": (0, 40)}
    today = quota_selectors.platform_usage_today()
    assert (today.tokens_used, today.cost_cents) == (40, Decimal("0.5000"))
    assert not PlatformCircuitBreaker.objects.exists()  # failed calls are no success for the breaker


@pytest.mark.embedded
def test_a_result_of_a_job_without_a_quota_day_counts_on_the_users_today():
    ai_settings = _limited(zone="Pacific/Kiritimati")
    quotas.usage_record_result(user_id=ai_settings.user_id, quota_date=None, api_key_mode="user_deepseek_key",
                               total_tokens=9, cost_cents=Decimal(0))  # fmt: skip
    assert _counted(ai_settings, quota_selectors.local_date(ai_settings=ai_settings)) == {"user_deepseek_key": (0, 9)}


# --- PostgreSQL's one statement and the ORM's moves count the same -----------------------------------

DAY_1, DAY_2, DAY_3 = dt.date(2099, 3, 1), dt.date(2099, 3, 2), dt.date(2099, 3, 3)


def _breaker(state: str, failures: int) -> Callable[[int], None]:
    def make(user_id: int) -> None:
        PlatformCircuitBreaker.objects.create(id=1, state=state, consecutive_failures=failures)

    return make


def _moved_twice(user_id: int) -> None:
    """The user moved from DAY_1 to DAY_2, then on to DAY_3, with usage on each."""
    for day, moved_to in ((DAY_1, DAY_2), (DAY_2, DAY_3), (DAY_3, None)):
        UserAiUsage.objects.create(user_id=user_id, local_date=day, api_key_mode="platform_key", job_count=1,
                                   tokens_used=10, cost_cents=Decimal(1), moved_to=moved_to)  # fmt: skip


def _nothing(user_id: int) -> None:
    pass


def _spent_today(user_id: int) -> None:
    """The platform spent on two shards today already, one of them the results' own."""
    for shard in (0, 5):
        PlatformDailyUsage.objects.create(day=quota_selectors.platform_day(), shard=shard, tokens_used=300,
                                          cost_cents=Decimal("0.5"))  # fmt: skip


# Each: what is there first, the platform's token budget, and the results' (quota day, tokens, cents).
SCENARIOS = {
    "the first result of all": (_nothing, 10_000, [(DAY_1, 500, "1.5")]),
    "results on the same day": (_nothing, 10_000, [(DAY_1, 500, "1.5"), (DAY_1, 20, "0.0001"), (DAY_1, 0, "0")]),
    "failures counted": (_breaker("closed", 3), 10_000, [(DAY_1, 5, "0.1")]),
    "open with failures": (_breaker("open", 12), 10_000, [(DAY_1, 5, "0.1")]),
    "half-open": (_breaker("half_open", 10), 10_000, [(DAY_1, 5, "0.1"), (DAY_1, 5, "0.1")]),
    "going over budget": (_breaker("closed", 1), 900, [(DAY_1, 500, "1"), (DAY_1, 500, "1"), (DAY_1, 1, "0")]),
    "half-open going over budget": (_breaker("half_open", 4), 400, [(DAY_1, 500, "2")]),
    "tokens following the user's moves": (_moved_twice, 10_000, [(DAY_1, 7, "0.25"), (DAY_2, 3, "0")]),
    "a job without a quota day": (_nothing, 10_000, [(None, 11, "0.5")]),
    "spent today already": (_spent_today, 1000, [(DAY_1, 300, "1"), (DAY_1, 100, "1")]),
}


def _counters(user_id: int) -> dict:
    usage_rows = UserAiUsage.objects.filter(user_id=user_id).order_by("local_date", "api_key_mode")
    breaker = PlatformCircuitBreaker.objects.filter(id=1).values_list("state", "consecutive_failures", "reason")
    today = quota_selectors.platform_usage_today()
    return {
        "user": list(usage_rows.values_list("local_date", "job_count", "tokens_used", "cost_cents", "moved_to")),
        "platform": (today.tokens_used, today.cost_cents, PlatformDailyUsage.objects.exclude(day=today.day).count()),
        "breaker": list(breaker),
        "events": list(
            CircuitBreakerEvent.objects.order_by("id").values_list(
                "from_state", "to_state", "actor", "reason", "consecutive_failures"
            )
        ),
    }


def _run(record: Callable[..., None], scenario: str) -> dict:
    """The scenario's results counted by ``record``, in a savepoint rolled back after:
    the counters they leave."""
    before, _budget, results = SCENARIOS[scenario]
    with transaction.atomic():
        user = UserFactory()
        quota_selectors.ai_settings_get(user=user)
        before(user.pk)
        for quota_date, tokens, cents in results:
            record(user_id=user.pk, quota_date=quota_date, total_tokens=tokens, cost_cents=Decimal(cents))
        counters = _counters(user.pk)
        transaction.set_rollback(True)
    return counters


def _platform_result(**kwargs) -> None:
    quotas.usage_record_result(api_key_mode="platform_key", **kwargs)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_platform_key_result_counts_the_same_in_one_statement_and_with_the_orm(scenario, settings, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("the one statement is PostgreSQL's (data-modifying CTEs)")
    settings.PLATFORM_DAILY_TOKEN_BUDGET = SCENARIOS[scenario][1]
    # One shard: each result meets the row an earlier one wrote.
    monkeypatch.setattr(counting, "platform_shard", lambda: 0)
    one_statement = _run(_platform_result, scenario)
    monkeypatch.setattr(counting, "_in_one_statement", counting._with_orm)  # SQLite's way, on PostgreSQL
    with_orm = _run(_platform_result, scenario)
    assert one_statement == with_orm
    assert one_statement["user"] and one_statement["platform"][0] > 0  # it did count


def test_on_postgresql_a_result_or_a_call_is_counted_in_one_statement():
    if connection.vendor != "postgresql":
        pytest.skip("counts PostgreSQL's statements")
    ai_settings = _limited()
    quota_selectors.breaker_get()
    day = quota_selectors.local_date(ai_settings=ai_settings)
    for record in (quotas.usage_record_result, quotas.usage_record_calls):
        for mode in ("platform_key", "user_deepseek_key"):
            with CaptureQueriesContext(connection) as captured:
                record(user_id=ai_settings.user_id, quota_date=day, api_key_mode=mode, total_tokens=3,
                       cost_cents=Decimal(0))  # fmt: skip
            (sql,) = [query["sql"] for query in captured.captured_queries]
            assert sql.startswith("WITH user_day AS"), (record, mode, sql)
    counted = quota_selectors.usage_of_day(user_id=ai_settings.user_id, day=day)
    assert counted["platform_key"].tokens_used == counted["user_deepseek_key"].tokens_used == 6
