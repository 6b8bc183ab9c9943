"""Retention: every kind of data that is deleted once past its time, in the order a
run deletes them. Each app declares its own kinds (``ai_jobs.services.retention``,
``asynch.retention``, ``delivery.retention``, ``quotas.retention``, ``accounts.retention``);
``config.retention`` runs them in bounded batches. Celery beat runs ``data_prune`` every
``RETENTION_INTERVAL_SECONDS`` (``ops.tasks.prune_data``); ``python manage.py
prune_data [--dry-run]`` runs it on demand."""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.utils import timezone

from accounts import retention as accounts
from ai_jobs.services import retention as jobs
from asynch import retention as asynch
from config.retention import Progress, Report, Sweep, prune
from delivery import retention as delivery
from ops import admin_login
from quotas import retention as quotas

logger = logging.getLogger(__name__)

# Snapshots before jobs: a snapshot's rule asks whether a recent job still uses it,
# which deleting old jobs never changes, so a dry run's counts are the real run's.
SWEEPS: list[Sweep] = [
    jobs.SNAPSHOTS,
    jobs.JOBS,
    jobs.NOTIFICATIONS,
    asynch.UNCLAIMED,
    asynch.STATS,
    delivery.DELIVERIES,
    *quotas.SWEEPS,
    jobs.QUEUE_SAMPLES,
    jobs.RUNTIME_INSTANCES,
    *admin_login.SWEEPS,
    accounts.EXPIRED_TOKENS,
]


def data_prune(*, dry_run: bool = False, now: dt.datetime | None = None, progress: Progress | None = None) -> Report:
    """Delete (or, ``dry_run``, count) everything past its retention at ``now``."""
    report = prune(
        SWEEPS,
        now=now or timezone.now(),
        batch_size=settings.RETENTION_BATCH_SIZE,
        dry_run=dry_run,
        progress=progress,
    )
    if not dry_run and report.total():
        logger.info(
            "retention: deleted %s in %.1f s",
            {kind: dict(counts) for kind, counts in report.kinds.items() if counts},
            report.seconds,
        )
    return report
