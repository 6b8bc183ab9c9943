"""What a model call costs, from DeepSeek's published per-token prices.

DeepSeek bills input tokens at two rates, a cheap one for the part of the prompt
that hit its context cache (``usage.prompt_cache_hit_tokens``) and the full one
for the rest (``usage.prompt_cache_miss_tokens``), plus a rate for output tokens.
Prices are USD per million tokens; costs are returned in US cents with the four
decimal places the internal API stores.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

logger = logging.getLogger(__name__)

MILLION = Decimal(1_000_000)
CENT_PLACES = Decimal("0.0001")


@dataclass(frozen=True)
class ModelPrice:
    cache_hit_per_million: Decimal  # USD per 1M input tokens served from the context cache
    cache_miss_per_million: Decimal  # USD per 1M input tokens not in the cache
    output_per_million: Decimal  # USD per 1M output tokens


# DeepSeek's price list (api-docs.deepseek.com/quick_start/pricing, V3.2 prices of
# 2025-09-29: the same for both models). Change it here when the provider does.
PRICES: dict[str, ModelPrice] = {
    "deepseek-chat": ModelPrice(Decimal("0.028"), Decimal("0.28"), Decimal("0.42")),
    "deepseek-reasoner": ModelPrice(Decimal("0.028"), Decimal("0.28"), Decimal("0.42")),
}
DEFAULT_MODEL = "deepseek-chat"


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cache_hit_tokens: int = 0
    cache_miss_tokens: int = 0

    @classmethod
    def from_api(cls, usage: dict[str, Any] | None) -> Usage:
        """Read an OpenAI/DeepSeek ``usage`` object; a prompt with no cache split
        counts as all misses (the dearer rate)."""
        usage = usage or {}
        prompt = _int(usage.get("prompt_tokens"))
        completion = _int(usage.get("completion_tokens"))
        hit = usage.get("prompt_cache_hit_tokens")
        if hit is None:  # OpenAI's spelling of the same thing
            hit = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        hit = min(_int(hit), prompt)
        miss = usage.get("prompt_cache_miss_tokens")
        miss = prompt - hit if miss is None else _int(miss)
        total = _int(usage.get("total_tokens")) or prompt + completion
        return cls(prompt, completion, total, hit, miss)

    def wire(self) -> dict[str, int]:
        """The ``usage`` body of the internal API's result call."""
        return {
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "totalTokens": self.total_tokens,
        }


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


_warned: set[str] = set()


def price_of(model_name: str) -> ModelPrice:
    price = PRICES.get(model_name)
    if price is None:
        if model_name not in _warned:
            _warned.add(model_name)
            logger.warning("No price for model %r; costing it as %s", model_name, DEFAULT_MODEL)
        price = PRICES[DEFAULT_MODEL]
    return price


def cost_cents(model_name: str, usage: Usage) -> Decimal:
    """The call's cost in US cents, rounded to 4 decimal places."""
    price = price_of(model_name)
    usd = (
        usage.cache_hit_tokens * price.cache_hit_per_million
        + usage.cache_miss_tokens * price.cache_miss_per_million
        + usage.completion_tokens * price.output_per_million
    ) / MILLION
    return (usd * 100).quantize(CENT_PLACES, rounding=ROUND_HALF_UP)
