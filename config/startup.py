"""What a web process checks before it serves (``config/wsgi.py``): settings that are
well-formed but unsafe in production, named so the operator knows what to fix."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# A runtime token is a bearer secret the internal API takes from any address: long
# enough that guessing it, even at the failed-authentication throttle's pace, is hopeless.
MIN_RUNTIME_TOKEN_LENGTH = 32


def refuse_weak_runtime_tokens() -> None:
    """With ``DEBUG`` false, a token in ``RUNTIME_SERVICE_TOKENS`` shorter than
    ``MIN_RUNTIME_TOKEN_LENGTH`` characters stops the web process from starting."""
    if settings.DEBUG:
        return
    short = [
        position
        for position, token in enumerate(settings.RUNTIME_SERVICE_TOKENS, 1)
        if len(token) < MIN_RUNTIME_TOKEN_LENGTH
    ]
    if short:
        raise ImproperlyConfigured(
            f"DEBUG is false, and RUNTIME_SERVICE_TOKENS entry {', '.join(map(str, short))} is shorter than "
            f"{MIN_RUNTIME_TOKEN_LENGTH} characters: use long random tokens (python -c "
            "'import secrets; print(secrets.token_urlsafe(32))')."
        )
