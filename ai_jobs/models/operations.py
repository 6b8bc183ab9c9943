"""What operators watch that the job rows alone do not tell: which runtime
instances have called lately, and the queue's depth minute by minute."""

from __future__ import annotations

from functools import partial

from django.conf import settings
from django.db import models
from django.utils import timezone

from config.ids import new_id


class RuntimeInstance(models.Model):
    """A runtime instance seen on the internal API. Written at most once per
    ``RUNTIME_SEEN_WRITE_SECONDS`` per instance and web process, so an idle runtime
    that only polls is still known to be alive."""

    instance_id = models.CharField(primary_key=True, max_length=128)
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "ai_runtime_instance"
        indexes = [models.Index(fields=["last_seen_at"], name="ai_runtime_instance_seen")]

    def __str__(self) -> str:
        return self.instance_id


class QueueSample(models.Model):
    """The queue's depth at one minute (Celery beat), for the dashboard's chart."""

    minute = models.DateTimeField(primary_key=True)
    pending = models.IntegerField(default=0)
    pending_due = models.IntegerField(default=0)
    locked = models.IntegerField(default=0)
    running = models.IntegerField(default=0)

    class Meta:
        db_table = "ai_queue_sample"

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M} pending {self.pending}"


class JobTypePause(models.Model):
    """A paused job type: while its row exists, claim, poll and lock pass over the type's
    pending jobs (``ai_jobs.pauses``); creating them still works. Resuming deletes it."""

    job_type = models.CharField(primary_key=True, max_length=40)
    paused_at = models.DateTimeField(default=timezone.now)
    paused_by = models.CharField(max_length=150, default="system")
    reason = models.TextField(blank=True, default="")

    class Meta:
        db_table = "ai_job_type_pause"
        verbose_name = "paused job type"
        default_permissions = ("view",)
        permissions = [("pause_jobtype", "Can pause and resume a job type")]

    def __str__(self) -> str:
        return self.job_type


class BulkOperationKind(models.TextChoices):
    RERUN = "rerun", "rerun failed jobs"
    CANCEL = "cancel", "cancel pending and running jobs"


class BulkOperation(models.Model):
    """An operator's rerun or cancel of every job matching a filter, worked through in
    batches by a Celery task (``ai_jobs.services.bulk``). Once finished,
    ``done + refused + skipped == matched``."""

    id = models.CharField(primary_key=True, max_length=40, default=partial(new_id, "bulk"), editable=False)
    kind = models.CharField(max_length=16, choices=BulkOperationKind.choices)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    filter = models.JSONField(default=dict, blank=True)
    matched = models.IntegerField(default=0)
    done = models.IntegerField(default=0)
    refused = models.IntegerField(default=0)
    skipped = models.IntegerField(default=0)
    # The last job id worked on: how far the run got.
    cursor = models.CharField(max_length=40, blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The run that holds the operation, and when it last committed a batch: a run that
    # stopped (its worker lost) is taken over from ``cursor`` once that is long past.
    runner = models.CharField(max_length=40, blank=True, default="")
    progressed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "ai_bulk_operation"
        verbose_name = "bulk operation"
        verbose_name_plural = "Bulk operations"
        indexes = [models.Index(fields=["-created_at"], name="ai_bulk_operation_created")]

    def __str__(self) -> str:
        return f"{self.id} {self.kind}"
