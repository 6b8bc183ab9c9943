"""What retention deletes of the jobs and what hangs off them as
``config.retention.Sweep`` kinds that ``ops.retention`` runs in this order:

- ``snapshots``: a snapshot (the copy of the learner's data) once no job that uses
  it is unfinished or finished within ``AI_SNAPSHOT_RETENTION_DAYS``, and made before
  that: the snapshots of jobs finished longer ago, and those a rebuild replaced. A
  snapshot never outlives its jobs' own retention (the shorter of the two settings),
  so deleting jobs never has a snapshot left to delete;
- ``jobs``: jobs finished more than ``AI_JOB_RETENTION_DAYS`` ago, with their result
  and invocation logs (their foreign keys cascade) and the candidates their result
  stored (``job_types``' outputs that no list shows). What the user reads back (the
  models of the registry's output lists: analyses, weak points, recommendations,
  published questions and cards) stays, naming the job by its plain ``job_id``;
  a rerun of a deleted job keeps its ``retriedFromJobId`` empty;
- ``notifications``: made more than ``AI_NOTIFICATION_RETENTION_DAYS`` ago;
- ``queueSamples`` and ``runtimeInstances``: the dashboard's minute samples after two
  days, runtime instances unseen for seven.

Each reads from an index on its time field: ``ai_snapshot_created``,
``ai_job_finished``, ``ai_ntf_created``, the queue sample's key, ``ai_runtime_instance_seen``.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import Exists, Model, OuterRef, Q, QuerySet

from ai_jobs import job_types
from ai_jobs.models import AiJobSnapshot, AiRuntimeJob, Notification, QueueSample, RuntimeInstance
from config.retention import Sweep

QUEUE_SAMPLE_RETENTION = dt.timedelta(days=2)  # the dashboard draws the last hour
RUNTIME_INSTANCE_RETENTION = dt.timedelta(days=7)


def snapshot_cutoff(now: dt.datetime) -> dt.datetime:
    days = min(settings.AI_SNAPSHOT_RETENTION_DAYS, settings.AI_JOB_RETENTION_DAYS)
    return now - dt.timedelta(days=days)


def snapshots_due(now: dt.datetime) -> QuerySet[AiJobSnapshot]:
    cutoff = snapshot_cutoff(now)
    in_use = AiRuntimeJob.objects.filter(snapshot_id=OuterRef("pk")).filter(
        Q(finished_at__isnull=True) | Q(finished_at__gte=cutoff)
    )
    return AiJobSnapshot.objects.filter(created_at__lt=cutoff).filter(~Exists(in_use))


def jobs_due(now: dt.datetime) -> QuerySet[AiRuntimeJob]:
    return AiRuntimeJob.objects.filter(finished_at__lt=now - dt.timedelta(days=settings.AI_JOB_RETENTION_DAYS))


def result_traces() -> list[type[Model]]:
    """The outputs that record how a result was stored (quiz and flashcard
    candidates) but that no user list shows: they go with their job."""
    listed = {output_list.model for output_list in job_types.output_lists()}
    return [model for model in job_types.output_models() if model not in listed]


def traces_of(jobs: QuerySet[AiRuntimeJob]) -> list[QuerySet]:
    return [model._default_manager.filter(job_id__in=jobs.values("pk")) for model in result_traces()]


def notifications_due(now: dt.datetime) -> QuerySet[Notification]:
    return Notification.objects.filter(created_at__lt=now - dt.timedelta(days=settings.AI_NOTIFICATION_RETENTION_DAYS))


def queue_samples_due(now: dt.datetime) -> QuerySet[QueueSample]:
    return QueueSample.objects.filter(minute__lt=now - QUEUE_SAMPLE_RETENTION)


def runtime_instances_due(now: dt.datetime) -> QuerySet[RuntimeInstance]:
    return RuntimeInstance.objects.filter(last_seen_at__lt=now - RUNTIME_INSTANCE_RETENTION)


SNAPSHOTS = Sweep(kind="snapshots", due=snapshots_due, order_by="created_at")
JOBS = Sweep(kind="jobs", due=jobs_due, order_by="finished_at", along=traces_of)
NOTIFICATIONS = Sweep(kind="notifications", due=notifications_due, order_by="created_at")
QUEUE_SAMPLES = Sweep(kind="queueSamples", due=queue_samples_due, order_by="minute")
RUNTIME_INSTANCES = Sweep(kind="runtimeInstances", due=runtime_instances_due, order_by="last_seen_at")
SWEEPS = [SNAPSHOTS, JOBS, NOTIFICATIONS, QUEUE_SAMPLES, RUNTIME_INSTANCES]
