"""The user's notices that one of their jobs finished."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from ai_jobs.models.outputs import JobLinked, list_indexes, prefixed_id


class NotificationKind(models.TextChoices):
    JOB_SUCCEEDED = "job_succeeded"
    JOB_FAILED = "job_failed"


class Notification(JobLinked):
    """A notice to the user that one of their jobs finished. At most one per job and
    kind, so a task that runs twice notifies once."""

    id = prefixed_id("ntf")
    kind = models.CharField(max_length=20, choices=NotificationKind.choices)
    job_type = models.CharField(max_length=40)
    title = models.CharField(max_length=200)
    message = models.TextField(blank=True, default="")
    data = models.JSONField(default=dict, blank=True, help_text="Counts of what the job produced")
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "ai_notification"
        indexes = [
            *list_indexes("ai_ntf"),
            models.Index(
                fields=["user", "-created_at", "-id"], name="ai_ntf_user_unread", condition=Q(read_at__isnull=True)
            ),
            models.Index(fields=["created_at"], name="ai_ntf_created"),  # retention's sweep
        ]
        constraints = [models.UniqueConstraint(fields=["job_id", "kind"], name="ai_notification_once")]

    def __str__(self) -> str:
        return f"{self.id} {self.kind} {self.job_id}"
