"""Keys never reach a log line or an error message sent to the server.

Every key the runtime resolves is registered here; a logging filter and
``redact()`` replace it with a mask wherever it would appear, and anything shaped
like a DeepSeek/OpenAI key (``sk-...``) is masked too.
"""

from __future__ import annotations

import logging
import re
import threading

_KEY_SHAPE = re.compile(r"sk-[A-Za-z0-9_\-]{6,}")
_lock = threading.Lock()
_secrets: set[str] = set()


def register_secret(value: str) -> None:
    if value and len(value) >= 4:
        with _lock:
            _secrets.add(value)


def mask(value: str) -> str:
    return f"****{value[-4:]}" if len(value) > 8 else "****"


def redact(text: str) -> str:
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, "****")
    return _KEY_SHAPE.sub(lambda m: "sk-****", text)


class RedactingFilter(logging.Filter):
    """Renders the record's message once, masked, so no argument leaks a key."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to the handler to report
            return True
        clean = redact(message)
        if clean != message or record.args:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_text is None and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True


def install(logger: logging.Logger | None = None) -> None:
    """Put the filter on every handler of ``logger`` (the root by default), where
    it also sees records propagated from every other logger."""
    target = logger or logging.getLogger()
    for handler in target.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
