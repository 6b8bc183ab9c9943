"""The one Celery app. Tasks carry ids, never state (DESIGN rule 4)."""

import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect(weak=False)
@task_postrun.connect(weak=False)
def _reuse_connections(task: Any = None, **kwargs: Any) -> None:
    """A task's database connections, kept from task to task (``CELERY_DB_REUSE_MAX``
    stops Celery closing them), are handled as a request's: one past ``CONN_MAX_AGE``
    or broken is closed, the next use of the others checks them first
    (``CONN_HEALTH_CHECKS``), so a restarted database costs no task. Eager tasks run
    inside their caller's transaction: not theirs to close."""
    if getattr(getattr(task, "request", None), "is_eager", False):
        return
    close_old_connections()


from config.observability import celery as _observability  # noqa: E402, F401  (log context, metrics flush)
