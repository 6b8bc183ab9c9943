"""Exponential backoff with jitter, for an API or a model that does not answer."""

from __future__ import annotations

import random


class Backoff:
    """Each step doubles up to ``most``; half of it is fixed, half random, so
    runtimes failing together do not come back together."""

    def __init__(self, first: float = 0.2, most: float = 10.0) -> None:
        self.first, self.most, self.failures = first, most, 0

    def next(self, hint: float | None = None) -> float:
        self.failures += 1
        step = min(self.most, self.first * 2 ** (self.failures - 1))
        return max(hint or 0.0, step / 2 + random.uniform(0, step / 2))

    def reset(self) -> None:
        self.failures = 0
