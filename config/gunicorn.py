"""gunicorn's settings for this project: ``gunicorn config.wsgi -c config/gunicorn.py``.

Its lines in ``LOG_FORMAT`` with the request id on each access line; each worker
pushes its buffered metrics when it exits."""

from pathlib import Path

import environ

environ.Env.read_env(Path(__file__).resolve().parent.parent / ".env", overwrite=False)

logger_class = "config.observability.gunicorn.Logger"


def worker_exit(server, worker):  # type: ignore[no-untyped-def]
    from config.observability import metrics

    metrics.flush()
