"""Figures as operators read them (config.formatting): dollars with two decimals,
token counts with separators, a share of the budget."""

from decimal import Decimal

from config import formatting


def test_money_is_dollars_with_two_decimals_whatever_the_cents_type():
    assert formatting.dollars(Decimal("46.6400")) == "$0.47"
    assert formatting.dollars(0.46640000000000004) == "$0.00"
    assert formatting.dollars(Decimal("12345.6789")) == "$123.46"
    assert formatting.dollars(50_000) == "$500.00"
    assert formatting.dollars(None) == "$0.00"
    assert formatting.dollars(123_456_789) == "$1,234,567.89"


def test_counts_have_separators_and_shares_one_decimal():
    assert formatting.count(3_456_789) == "3,456,789"
    assert formatting.tokens_of(1_234_567, 10_000_000) == "1,234,567 of 10,000,000 (12.3%)"
    assert formatting.dollars_of(Decimal("25050"), 50_000) == "$250.50 of $500.00 (50.1%)"
    assert formatting.share(5, 0) == 0.0
