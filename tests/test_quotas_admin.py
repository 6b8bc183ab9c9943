"""The quotas' admin pages as operators read them: usage in dollars with two decimals and
token counts with separators, each as a share of its budget; the breaker panel says
what its state admits; the platform's over-budget reason is written the same way."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import UserAiUsage
from tests.support.factories import JobFactory, UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


@pytest.fixture
def operator() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("operator", "op@example.com", "pw"))
    return client


def test_users_usage_reads_in_dollars_and_separated_tokens_against_their_limits(operator):
    learner = UserFactory(username="ada")
    UserAiUsage.objects.create(
        user=learner, local_date="2026-12-01", api_key_mode="platform_key", job_count=3, tokens_used=12_345,
        cost_cents=Decimal("46.6400"),
    )  # fmt: skip
    page = operator.get("/admin/quotas/useraiusage/").content.decode()
    assert "3 of 20 (15.0%)" in page and "12,345 of 100,000 (12.3%)" in page and "$0.47" in page
    assert "46.64" not in page


def test_the_breaker_panel_says_what_each_state_admits_and_selects_the_current_one(operator, settings):
    JobFactory()
    JobFactory()
    quotas.platform_usage_add(tokens=3_456_789, cost_cents=Decimal("12345.6789"))
    page = operator.get("/admin/quotas/platformcircuitbreaker/").content.decode()
    assert "2 (no limit while closed)" in page and '<option value="closed" selected>' in page
    assert "3,456,789 of 10,000,000 (34.6%)" in page and "$123.46 of $500.00 (24.7%)" in page
    quotas.breaker_transition(to="open", actor="t", reason="test")
    assert "2 (none admitted while open)" in operator.get("/admin/quotas/platformcircuitbreaker/").content.decode()
    quotas.breaker_transition(to="half_open", actor="t", reason="test")
    page = operator.get("/admin/quotas/platformcircuitbreaker/").content.decode()
    assert "2 of 2 allowed while half-open" in page and '<option value="half_open" selected>' in page


def test_the_over_budget_reason_is_written_as_people_read_figures(settings):
    settings.PLATFORM_DAILY_COST_BUDGET_CENTS = 100
    quotas.platform_usage_add(tokens=5, cost_cents=Decimal("100.5"))
    assert quota_selectors.platform_over_budget() == "Platform daily cost budget used: $1.01 of $1.00 (100.5%)"
    settings.PLATFORM_DAILY_TOKEN_BUDGET = 4
    assert quota_selectors.platform_over_budget() == "Platform daily token budget used: 5 of 4 (125.0%)"
