"""What a username is, written once: registration, login, Django admin's user forms
and the per-username throttle all go through these two functions, so no two of them
can disagree on which spellings are one account.

- ``username_normalize``: what is stored. Unicode NFKC (``"\\uff21LICE"``, with a
  fullwidth A, is ``ALICE``), then surrounding whitespace removed (``" alice"``,
  ``"alice\\t"``, ``"\\u3000alice"`` are ``alice``). The case the person chose is kept.
- ``username_key``: what is compared and throttled. The normalized name casefolded
  (Unicode's caseless match: ``ALICE``, ``Alice``, ``alice``; ``STRASSE``, ``straße``),
  then NFKC again, since casefolding can leave a string that NFKC would still change.
  ``accounts_account.username_key`` holds it, unique."""

from __future__ import annotations

import unicodedata


def username_normalize(name: str) -> str:
    return unicodedata.normalize("NFKC", name).strip()


def username_key(name: str) -> str:
    return unicodedata.normalize("NFKC", username_normalize(name).casefold())
