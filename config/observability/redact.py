"""The last guard before a log line leaves: shapes of keys and tokens are masked in
the formatted line, whatever put them there (a message, an argument, a traceback,
an extra field). The code never logs a key on purpose (tests/test_credentials_canary
proves it record by record); this catches what a library or a mistake would."""

from __future__ import annotations

import re

_PATTERNS = [
    # DeepSeek / OpenAI-shaped keys, and model-asynch tenant keys.
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), "sk-****"),
    (re.compile(r"\bak_[A-Za-z0-9_\-]{16,}"), "ak_****"),
    # Bearer credentials (JWTs, runtime tokens, METRICS_TOKEN) wherever a header is echoed.
    (re.compile(r"(?i)\b(bearer)\s++[A-Za-z0-9._~+/=\-]{8,}"), r"\1 ****"),
    # Credentials in URLs: scheme://user:password@host. The scheme's length is bounded: an
    # unbounded run tried from every word in a long "a.a.a..." made a line cost its length
    # squared; possessive runs (classes that exclude what follows them) never backtrack.
    (re.compile(r"(\b[a-z][a-z0-9+.\-]{0,39}://[^\s:/@]*+):[^\s@/]++@"), r"\1:****@"),
    # A signed model-asynch download URL is itself the permission to read the file.
    (re.compile(r"/task/download/[^\s\"'?]+"), "/task/download/****"),
]


def configured_secrets() -> list[str]:
    """The secrets the settings hold, read at each call so a changed setting counts."""
    try:
        from django.conf import settings

        values = [
            *getattr(settings, "RUNTIME_SERVICE_TOKENS", []),
            getattr(settings, "PLATFORM_DEEPSEEK_API_KEY", ""),
            getattr(settings, "METRICS_TOKEN", ""),
        ]
    except Exception:  # settings not configured (a bare gunicorn master): shapes only
        return []
    return [value for value in values if value and len(value) >= 6]


def redact(text: str) -> str:
    for secret in sorted(configured_secrets(), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "****")
    for pattern, mask in _PATTERNS:
        text = pattern.sub(mask, text)
    return text
