"""Celery and the log context: a task's lines carry the id of the request that
queued it (a header set at publish), and nothing of a previous task; Celery leaves
the root logger to Django's ``LOGGING``, so a worker logs in ``LOG_FORMAT`` too;
a worker process pushes its metrics before it exits."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from celery.signals import before_task_publish, setup_logging, task_postrun, task_prerun, worker_process_shutdown

from config.observability import context, metrics

_tokens: dict[str, Any] = {}


@setup_logging.connect(weak=False)
def _keep_django_logging(loglevel: int | str | None = None, **kwargs: Any) -> None:
    """Connected, this stops Celery from replacing the root logger's handlers; its
    ``--loglevel`` still sets the level, as it would have."""
    if loglevel:
        logging.getLogger().setLevel(loglevel)


@before_task_publish.connect(weak=False)
def _carry_request_id(headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    request_id = context.request_id()
    if request_id and headers is not None:
        headers.setdefault("request_id", request_id)


@task_prerun.connect(weak=False)
def _open(task_id: str | None = None, task: Any = None, **kwargs: Any) -> None:
    request = getattr(task, "request", None)
    request_id = getattr(request, "request_id", None) or (getattr(request, "headers", None) or {}).get("request_id")
    if task_id:
        _tokens[task_id] = context.open_context(requestId=request_id if isinstance(request_id, str) else None)


@task_postrun.connect(weak=False)
def _close(task_id: str | None = None, **kwargs: Any) -> None:
    token = _tokens.pop(task_id, None) if task_id else None
    if token is not None:
        with contextlib.suppress(ValueError):  # opened in another context (an eager task in a thread)
            context.close_context(token)


@worker_process_shutdown.connect(weak=False)
def _flush(**kwargs: Any) -> None:
    metrics.flush()
