"""The reaper: lapsed leases and timed-out attempts back to the queue."""

from __future__ import annotations

import logging
from collections import Counter

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ai_jobs import metrics, transitions
from ai_jobs.notifications import FinishedJob, notification_write_failed

logger = logging.getLogger(__name__)


# --- the reaper -------------------------------------------------------------------------


def jobs_reap(*, batch_size: int | None = None) -> Counter[str]:
    """Return lapsed work to the queue: a job whose lease
    lapsed or whose attempt ran past ``timeoutSeconds`` becomes ``expired`` and then
    ``pending`` with ``retryCount + 1``, or ``failed`` (``JOB_TIMEOUT``) when no
    retries remain. Each batch is its own short transaction and the cursor moves
    on by id, so a backlog of any size drains without one long lock."""
    batch = batch_size or settings.AI_JOB_REAPER_BATCH_SIZE
    now = timezone.now()  # fixed for the run: what lapses later is the next run's
    totals: Counter[str] = Counter()
    cursor = ""
    while True:
        with transaction.atomic():
            ids = transitions.lapsed_ids(after_id=cursor, now=now, limit=batch)
            if not ids:
                break
            totals["expired"] += len(transitions.expire(after_id=cursor, last_id=ids[-1], now=now))
            settled = transitions.settle_expired(after_id=cursor, last_id=ids[-1], now=now)
            totals.update(job.status for job in settled)
            # The timed-out jobs' notices, in the transaction that failed them.
            notification_write_failed(
                jobs=[
                    FinishedJob(job.id, job.user_id, job.job_type, job.target_type, job.target_id, job.error_code)
                    for job in settled
                    if job.status == "failed"
                ]
            )
            for status, code in (("failed", "JOB_TIMEOUT"), ("cancelled", "JOB_CANCELLED")):
                types = [job.job_type for job in settled if job.status == status]
                metrics.jobs_finished(status=status, job_types=types, error_code=code)
        cursor = ids[-1]
        if len(ids) < batch:
            break
    if totals:
        logger.info("reaper: %s", dict(totals))
    return totals
