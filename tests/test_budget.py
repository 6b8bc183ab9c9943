"""The platform key's daily budget: the tokens and cost of the platform's day, the sum of its
shard rows. Going over it opens the breaker; while the day's budget is used up new
platform-key jobs get the budget's own code, not the breaker's; once the day has
turned, the breaker it opened answers until an operator half-opens it."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from config.errors import DomainError, ErrorCode
from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import CircuitState, PlatformDailyUsage
from tests.support.api import error_code
from tests.support.breaker import breaker_open
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def _spend_today(tokens: int = 0, cents: int = 0, day: dt.date | None = None) -> None:
    PlatformDailyUsage.objects.create(
        day=day or quota_selectors.platform_day(), shard=0, tokens_used=tokens, cost_cents=cents
    )


def _refused(code: ErrorCode) -> None:
    with pytest.raises(DomainError) as refused:
        quotas.platform_admit()
    assert refused.value.code == code


# --- through the user API ---------------------------------------------------------------------------


def test_while_todays_platform_tokens_are_used_up_new_platform_jobs_get_the_token_budget_code(settings):
    settings.PLATFORM_DAILY_TOKEN_BUDGET = 1000
    learner = Learner()
    _spend_today(tokens=999)
    quotas.platform_usage_add(tokens=1, cost_cents=Decimal(0))  # going over opens the breaker
    assert quota_selectors.breaker_get().state == CircuitState.OPEN
    refused = learner.job()
    assert refused.status_code == 400 and error_code(refused) == "PLATFORM_TOKEN_BUDGET_EXCEEDED"
    # The user's own key is not the platform's budget.
    credential = learner.credential()
    assert learner.job(apiKeyMode="user_deepseek_key", credentialId=credential).status_code == 201


def test_while_todays_platform_cost_is_used_up_new_platform_jobs_get_the_cost_budget_code(settings):
    settings.PLATFORM_DAILY_COST_BUDGET_CENTS = 100
    learner = Learner()
    quotas.platform_usage_add(tokens=10, cost_cents=Decimal(100))
    assert quota_selectors.breaker_get().state == CircuitState.OPEN
    refused = learner.job()
    assert refused.status_code == 400 and error_code(refused) == "PLATFORM_COST_BUDGET_EXCEEDED"


def test_once_the_day_has_turned_an_open_breaker_answers_circuit_open_until_half_opened(settings):
    settings.PLATFORM_DAILY_TOKEN_BUDGET = 1000
    learner = Learner()
    _spend_today(tokens=5000, day=quota_selectors.platform_day() - dt.timedelta(days=1))  # yesterday's overspend
    quotas.breaker_transition(to=CircuitState.OPEN, actor="system", reason="yesterday's budget")
    refused = learner.job()
    assert refused.status_code == 503 and error_code(refused) == "PLATFORM_CIRCUIT_OPEN"
    quotas.breaker_transition(to=CircuitState.HALF_OPEN, actor="operator", reason="new day")
    assert learner.job().status_code == 201


# --- its services -------------------------------------------------------------------------------------


def test_the_days_usage_is_the_sum_of_its_shards_and_yesterday_is_not_today():
    _spend_today(tokens=5000, cents=7, day=quota_selectors.platform_day() - dt.timedelta(days=1))
    for _ in range(40):
        quotas.platform_usage_add(tokens=3, cost_cents=Decimal("0.0125"))
    today = quota_selectors.platform_usage_today()
    assert (today.day, today.tokens_used, today.cost_cents) == (quota_selectors.platform_day(), 120, Decimal("0.5000"))
    assert 1 < PlatformDailyUsage.objects.filter(day=today.day).count() <= 16  # spread over shards
    assert quota_selectors.platform_over_budget() == ""


def test_the_budgets_answer_before_the_breaker_and_a_breaker_never_written_is_closed(settings):
    assert quotas.platform_admit() == "closed"
    breaker_open()
    _refused(ErrorCode.PLATFORM_CIRCUIT_OPEN)
    settings.PLATFORM_DAILY_COST_BUDGET_CENTS = 5
    _spend_today(cents=5)
    _refused(ErrorCode.PLATFORM_COST_BUDGET_EXCEEDED)
    settings.PLATFORM_DAILY_TOKEN_BUDGET = 10
    _spend_today(tokens=10, day=quota_selectors.platform_day() + dt.timedelta(days=1))  # tomorrow's: not today's
    _refused(ErrorCode.PLATFORM_COST_BUDGET_EXCEEDED)
    PlatformDailyUsage.objects.filter(day=quota_selectors.platform_day()).update(tokens_used=10)
    _refused(ErrorCode.PLATFORM_TOKEN_BUDGET_EXCEEDED)  # the token budget is read first


def test_going_over_opens_a_half_open_breaker_too_and_an_open_one_stays_as_it_is(settings):
    settings.PLATFORM_DAILY_TOKEN_BUDGET = 10
    breaker_open()
    quotas.breaker_transition(to=CircuitState.HALF_OPEN, actor="operator", reason="try again")
    quotas.platform_usage_add(tokens=10, cost_cents=Decimal(0))
    breaker = quota_selectors.breaker_get()
    assert breaker.state == CircuitState.OPEN and breaker.reason.startswith(
        "Platform daily token budget used: 10 of 10"
    )
    quotas.platform_usage_add(tokens=1, cost_cents=Decimal(0))
    assert quota_selectors.breaker_get().reason == breaker.reason  # no second move
