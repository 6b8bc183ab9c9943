"""What operators watch that the job rows alone do not tell: which runtime
instances have called lately, and the queue's depth minute by minute."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


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
