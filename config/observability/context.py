"""The log context: what a log line concerns (``requestId``, ``jobId``,
``runtimeInstanceId``, ``taskId``), carried in one context variable so every line a
request, a job or a task causes carries it, whichever module logs it.

The request middleware and the Celery signals open a fresh context and close it
again; inside, views and workers ``bind`` what they know."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token

FIELDS = ("requestId", "jobId", "runtimeInstanceId", "taskId")

_EMPTY: Mapping[str, str] = {}
_context: ContextVar[Mapping[str, str]] = ContextVar("log_context", default=_EMPTY)


def current() -> Mapping[str, str]:
    return _context.get()


def request_id() -> str | None:
    return _context.get().get("requestId")


def open_context(**fields: str | None) -> Token[Mapping[str, str]]:
    """A fresh context (nothing of an earlier one), for a request or a task."""
    return _context.set({key: value for key, value in fields.items() if value})


def close_context(token: Token[Mapping[str, str]]) -> None:
    _context.reset(token)


def bind(**fields: str | None) -> None:
    """Add to the current context until it is closed (``jobId="job_..."``)."""
    given = {key: value for key, value in fields.items() if value}
    if given:
        _context.set({**_context.get(), **given})


@contextmanager
def bound(**fields: str | None) -> Iterator[None]:
    """Add to the context for a block only (a worker thread's task, one job)."""
    token = _context.set({**_context.get(), **{key: value for key, value in fields.items() if value}})
    try:
        yield
    finally:
        _context.reset(token)
