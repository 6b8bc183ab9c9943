"""How operators read figures, the same on every admin page and the dashboard:
money in dollars with two decimals (it is counted in cents with four), token counts
with thousands separators, a figure as a share of its budget, and a JSON document
indented (a job's output, its parameters) rather than one long line."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString


def dollars(cents: Decimal | int | float | None) -> str:
    """``12345.6789`` cents → ``$123.46``."""
    amount = (Decimal(str(cents or 0)) / 100).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"${amount:,.2f}"


def count(value: int | None) -> str:
    """``3456789`` → ``3,456,789``."""
    return f"{int(value or 0):,}"


def share(used: Decimal | int | float, budget: Decimal | int | float) -> float:
    """``used`` as a percentage of ``budget`` (0 when there is no budget)."""
    return float(used) / float(budget) * 100 if budget else 0.0


def of_budget(used_text: str, budget_text: str, percent: float) -> str:
    """``3,456,789 of 10,000,000 (34.6%)``."""
    return f"{used_text} of {budget_text} ({percent:.1f}%)"


def tokens_of(used: int, budget: int) -> str:
    return of_budget(count(used), count(budget), share(used, budget))


def dollars_of(used_cents: Decimal | int | float, budget_cents: Decimal | int | float) -> str:
    return of_budget(dollars(used_cents), dollars(budget_cents), share(used_cents, budget_cents))


def pretty_json(value: Any) -> SafeString:
    """A JSON document, indented, in a ``<pre>`` (escaped: a model wrote it)."""
    return format_html('<pre class="json">{}</pre>', json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False))
