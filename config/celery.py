"""The one Celery app. Tasks carry ids, never state (DESIGN rule 4)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

from config.observability import celery as _observability  # noqa: E402, F401  (log context, metrics flush)
