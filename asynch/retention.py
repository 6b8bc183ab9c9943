"""What retention deletes of model-asynch: tasks that succeeded (state 2) but that
nobody picked up with ``getTaskBatch``, ``ASYNCH_UNCLAIMED_RETENTION_SECONDS`` after
they finished, with their stored files (the cleaner deletes the rest of a task's
life); and the daily statistics ``AI_COUNTER_RETENTION_DAYS`` after their day (the
platform's, ``PLATFORM_TIMEZONE``). Read from the partial index
``asynch_task_unclaimed`` and from ``asynch_stat_day_model``; a task that
``getTaskBatch`` is moving to 4 at that moment is locked and skipped."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import QuerySet

from asynch.models import AsynchModelStat, AsynchTask, TaskState
from asynch.storage import delete_quietly
from config.days import platform_day
from config.retention import Sweep


def unclaimed_due(now: dt.datetime) -> QuerySet[AsynchTask]:
    before = now - dt.timedelta(seconds=settings.ASYNCH_UNCLAIMED_RETENTION_SECONDS)
    return AsynchTask.objects.filter(state=TaskState.SUCCEEDED, finished_at__lt=before)


UNCLAIMED = Sweep(
    kind="asynchUnclaimed",
    due=unclaimed_due,
    order_by="finished_at",
    file_field="oss_file",
    delete_files=delete_quietly,
)


def stats_due(now: dt.datetime) -> QuerySet[AsynchModelStat]:
    return AsynchModelStat.objects.filter(
        day__lt=platform_day(now) - dt.timedelta(days=settings.AI_COUNTER_RETENTION_DAYS)
    )


STATS = Sweep(kind="asynchStats", due=stats_due, order_by="day")
