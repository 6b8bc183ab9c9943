"""Opaque object ids: a short type prefix and 26 characters of Crockford base32.

The first 10 characters are the creation time in milliseconds, so ids sort by
creation and new rows land at the right edge of the primary-key index; the other
16 are 80 random bits, so ids cannot be guessed or enumerated.
"""

import secrets
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
# Every pair of digits, by the 10 bits they spell: ids are made on every write.
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]


def _base32(value: int, length: int) -> str:
    """``value``'s last ``length`` digits (``length`` even)."""
    pairs = []
    for _ in range(length // 2):
        pairs.append(_PAIRS[value & 1023])
        value >>= 10
    return "".join(reversed(pairs))


def new_id(prefix: str, *, at_ms: int | None = None) -> str:
    """A new id; ``at_ms`` dates it at another moment (a backfill of old rows)."""
    moment = time.time_ns() // 1_000_000 if at_ms is None else at_ms
    return f"{prefix}_{_base32((moment << 80) | secrets.randbits(80), 26)}"
