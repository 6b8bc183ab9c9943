"""Log formats (contract §8). ``LOG_FORMAT=text`` (the default) is one readable line
per record; ``LOG_FORMAT=json`` is one JSON object per line with ``time``, ``level``,
``logger``, ``message``, and ``requestId`` / ``jobId`` / ``runtimeInstanceId`` /
``taskId`` when the line concerns one. Both pass through ``redact`` last.

The context comes from ``config.observability.context`` (the filter copies it onto
each record) or from ``extra=`` on the call, which wins: the reference runtime, an
HTTP client that imports nothing of the server, names its job that way."""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from typing import Any

from config.observability import context
from config.observability.redact import redact

FORMATS = ("text", "json")


class ContextFilter(logging.Filter):
    """On a handler: every record that reaches it, from any logger, gets the context."""

    def filter(self, record: logging.LogRecord) -> bool:
        current = context.current()
        for field in context.FIELDS:
            if getattr(record, field, None) is None:
                setattr(record, field, current.get(field))
        return True


def _exception_text(formatter: logging.Formatter, record: logging.LogRecord) -> str:
    text = ""
    if record.exc_info:
        if not record.exc_text:
            record.exc_text = formatter.formatException(record.exc_info)
        text = record.exc_text
    if record.stack_info:
        text = (
            f"{text}\n{formatter.formatStack(record.stack_info)}" if text else formatter.formatStack(record.stack_info)
        )
    return text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds")[:-6] + "Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,  # which of several gunicorn or Celery workers
        }
        for field in context.FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                line[field] = str(value)
        exception = _exception_text(self, record)
        if exception:
            line["exception"] = exception
        return redact(json.dumps(line, ensure_ascii=False, default=str))


class TextFormatter(logging.Formatter):
    """``2026-01-01 12:00:00,123 INFO ai_jobs.services message [requestId=… jobId=…]``"""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        tags = " ".join(
            f"{field}={getattr(record, field)}" for field in context.FIELDS if getattr(record, field, None) is not None
        )
        if tags:
            line = f"{line} [{tags}]"
        exception = _exception_text(self, record)
        if exception:
            line = f"{line}\n{exception}"
        return redact(line)


def formatter_for(log_format: str) -> logging.Formatter:
    if log_format not in FORMATS:
        raise ValueError(f"LOG_FORMAT must be one of {', '.join(FORMATS)}, not {log_format!r}")
    return JsonFormatter() if log_format == "json" else TextFormatter()


def logging_config(*, log_format: str, level: str, levels: dict[str, str] | None = None) -> dict[str, Any]:
    """Django's ``LOGGING``: one stream handler on the root, formatted and filtered;
    ``levels`` sets some loggers' own level (``LOG_LEVELS``: ``celery.beat=WARNING,...``)."""
    formatter_for(log_format)  # refuse an unknown format at start-up, not at the first line
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": "config.observability.logging.ContextFilter"}},
        "formatters": {
            "text": {"()": "config.observability.logging.TextFormatter"},
            "json": {"()": "config.observability.logging.JsonFormatter"},
        },
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": log_format, "filters": ["context"]},
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {name: {"level": value.upper()} for name, value in (levels or {}).items()},
    }


class Throttled:
    """A warning at most once per ``every`` seconds per key: for failures that repeat
    on every request (metrics to a Redis that is down) and must not flood the log."""

    def __init__(self, logger: logging.Logger, *, every: float = 60.0) -> None:
        self.logger = logger
        self.every = every
        self._last: dict[str, float] = {}

    def warning(self, key: str, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last.get(key, float("-inf")) >= self.every:
            self._last[key] = now
            self.logger.warning(message, *args)
