"""The platform key's daily budget: tokens and cost of the platform's day (the date
in ``PLATFORM_TIMEZONE``), counted in shard rows; going over opens the breaker, and
while the day's budget is used up new platform-key jobs get its own codes."""

from __future__ import annotations

from decimal import Decimal

from config.errors import DomainError, ErrorCode
from config.sql import fetch
from quotas import queries
from quotas.models import ApiKeyMode
from quotas.selectors import PlatformUsage, platform_day, platform_usage, platform_usage_today
from quotas.services.breaker import breaker_check_open, breaker_open_over_budget
from quotas.services.counting import Count, usage_count


def platform_usage_add(*, tokens: int, cost_cents: Decimal) -> None:
    """Add to today's platform usage, no user's; going over a budget opens the breaker."""
    counted = usage_count(
        Count(
            user_id=None,
            day=None,
            api_key_mode=ApiKeyMode.PLATFORM_KEY,
            tokens=tokens,
            cost_cents=cost_cents,
            platform=True,
        )
    )
    if counted.platform is not None:
        breaker_open_over_budget(reason=counted.platform.over_budget())


def platform_budget_admit(usage: PlatformUsage | None = None) -> None:
    """Refuse a new platform-key job while today's token or cost budget is used up."""
    usage = usage or platform_usage_today()
    if usage.tokens_used >= usage.token_budget:
        raise DomainError(ErrorCode.PLATFORM_TOKEN_BUDGET_EXCEEDED, "The platform's daily token budget is used up")
    if usage.cost_cents >= usage.cost_budget_cents:
        raise DomainError(ErrorCode.PLATFORM_COST_BUDGET_EXCEEDED, "The platform's daily cost budget is used up")


def platform_admit() -> str:
    """The platform key's say on a new job, in one statement: the day's budgets first
    (their codes answer while they are used up, though going over opened the breaker),
    then the breaker (``PLATFORM_CIRCUIT_OPEN`` while open). Returns the breaker's state;
    a breaker never written yet is closed."""
    day = platform_day()
    ((tokens, cost, state),) = fetch(queries.PLATFORM_ADMISSION, {"day": day})
    platform_budget_admit(platform_usage(day=day, tokens=tokens, cost=cost))
    return breaker_check_open(state)
