"""Log formats. ``LOG_FORMAT=text`` (the default) is one readable line
per record; ``LOG_FORMAT=json`` is one JSON object per line with ``time``, ``level``,
``logger``, ``message``, and ``requestId`` / ``jobId`` / ``runtimeInstanceId`` /
``taskId`` when the line concerns one. Both pass through ``redact`` last.

The context comes from ``config.observability.context`` (the filter copies it onto
each record) or from ``extra=`` on the call, which wins: the reference runtime, an
HTTP client that imports nothing of the server, names its job that way.

A record is one line, whatever a caller put in it (a path with ``%0a``, a header): in
the text format every control character (C0, C1, U+2028/2029) of the message and the
tags is escaped (``\\n``, ``\\x0b``, ``\\u2028``), and a traceback follows on lines that
begin with a space, so only the formatter starts a line at its first column; in the
JSON format the characters JSON leaves raw (DEL, C1, U+2028/2029) are ``\\u`` escapes."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import time
from typing import Any

from config.observability import context
from config.observability.redact import redact

FORMATS = ("text", "json")


# Every character a log reader may take for the end of a line, or a terminal for a command.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")
# What json.dumps(ensure_ascii=False) leaves as it is.
_JSON_RAW = re.compile("[\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def one_line(text: str) -> str:
    """``text`` with each control character escaped: nothing in it can start a line."""
    return _CONTROL.sub(_escaped, text)


def _continuation(text: str) -> str:
    """A traceback under its record: its own line breaks kept, each line indented."""
    return "\n".join("    " + line for line in _CONTROL_BUT_NEWLINE.sub(_escaped, text).split("\n"))


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
        text = json.dumps(line, ensure_ascii=False, default=str)
        return redact(_JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


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
        line = one_line(line)
        exception = _exception_text(self, record)
        if exception:
            line = f"{line}\n{_continuation(exception)}"
        return redact(line)


def formatter_for(log_format: str) -> logging.Formatter:
    if log_format not in FORMATS:
        raise ValueError(f"LOG_FORMAT must be one of {', '.join(FORMATS)}, not {log_format!r}")
    return JsonFormatter() if log_format == "json" else TextFormatter()


# Libraries whose lines repeat what the request's own line says. django-axes writes two or
# three lines for each failed admin login (the request's line shows the login answered, and a
# lockout's is its 429); ``LOG_LEVELS=axes=INFO`` brings them back.
QUIET = {"axes": "ERROR"}


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
        "loggers": {name: {"level": value.upper()} for name, value in {**QUIET, **(levels or {})}.items()},
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
