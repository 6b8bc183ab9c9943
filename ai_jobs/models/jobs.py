"""The AI runtime job and what hangs off it: snapshots, results,
invocation logs. The states and the transitions between them live beside this
module, in ``ai_jobs.transitions``: nothing else writes ``status``."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from accounts.selectors import public_id_of
from config.ids import new_id
from quotas.models import ApiKeyMode


class TargetType(models.TextChoices):
    USER = "user"
    MATERIAL = "material"
    KNOWLEDGE_POINT = "knowledge_point"
    KNOWLEDGE_BASE = "knowledge_base"


class JobStatus(models.TextChoices):
    PENDING = "pending"
    LOCKED = "locked"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


ACTIVE_STATUSES = (JobStatus.LOCKED.value, JobStatus.RUNNING.value)
FINAL_STATUSES = (JobStatus.SUCCEEDED.value, JobStatus.FAILED.value, JobStatus.CANCELLED.value)


class UserPublicId:
    """``user_public_id``: the row's user by the opaque id its body carries. Reads that render rows compute it in their own statement
    (``selectors.with_public_ids``, the claim's ``RETURNING``); a row loaded without
    it reads it once."""

    user: Any
    user_id: int

    @property
    def user_public_id(self) -> str:
        value = self.__dict__.get("_user_public_id")
        if value is None:
            value = self.__dict__["_user_public_id"] = public_id_of(self.user)
        return value

    @user_public_id.setter
    def user_public_id(self, value: str) -> None:
        self.__dict__["_user_public_id"] = value


class AiRuntimeJob(UserPublicId, models.Model):
    # Not a column: whether the user has a device to push to, when the statement that
    # loaded the job said so (the result's move to succeeded); else assumed.
    user_has_devices = True

    id = models.CharField(primary_key=True, max_length=40, default=partial(new_id, "job"), editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ai_jobs")
    # One of the registry's (ai_jobs.job_types), checked when a job is created: a new
    # job type needs no migration.
    job_type = models.CharField(max_length=40)
    target_type = models.CharField(max_length=32, choices=TargetType.choices)
    target_id = models.CharField(max_length=64)
    snapshot = models.ForeignKey(
        "AiJobSnapshot", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_constraint=False
    )
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.PENDING)
    priority = models.IntegerField(default=0, help_text="0 is the highest")
    idempotency_key = models.CharField(max_length=128, null=True, blank=True)
    api_key_mode = models.CharField(max_length=32, choices=ApiKeyMode.choices, default=ApiKeyMode.PLATFORM_KEY)
    credential_id = models.CharField(max_length=40, null=True, blank=True)
    model_provider = models.CharField(max_length=32, default="deepseek")
    model_name = models.CharField(max_length=64, default="deepseek-chat")
    prompt_version = models.CharField(max_length=16, null=True, blank=True, default="v1")
    output_schema_version = models.CharField(max_length=16, null=True, blank=True, default="v1")
    attempt_no = models.IntegerField(default=0)
    retried_from_job = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns"
    )
    # The operator's rerun of this failed job, set once (ai_jobs.services.job_rerun): a
    # second rerun of the same job is refused.
    rerun_as = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    params = models.JSONField(default=dict, blank=True)

    # The lease of the current attempt. No index covers a column a heartbeat writes
    # (``lock_until``, ``updated_at``; ``status`` stays ``running``): PostgreSQL then
    # rewrites the row on its own page without touching any index (a HOT update), and
    # the queries that read leases find the few leased rows by ``ai_job_leased`` first.
    locked_by = models.CharField(max_length=128, null=True, blank=True)
    locked_at = models.DateTimeField(null=True, blank=True)
    lock_until = models.DateTimeField(null=True, blank=True)
    # The ``claimId`` of the claim that took the lease while nothing has touched the job
    # since (a heartbeat, a snapshot or credential call clears it): the same claim sent
    # again, its answer lost, is answered with these jobs instead of locking more.
    claim_id = models.CharField(max_length=64, null=True, blank=True)
    # When the current attempt runs out of ``timeout_seconds``, in epoch milliseconds:
    # an integer so lock and claim can set it as ``now + timeout_seconds * 1000`` in
    # one portable statement, whatever the database.
    deadline_ms = models.BigIntegerField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)

    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    retry_count = models.IntegerField(default=0)
    max_retry_count = models.IntegerField(default=3)
    timeout_seconds = models.IntegerField(default=120)
    # The user's local day the job was counted on (its quota row); its tokens count there too.
    quota_date = models.DateField(null=True, blank=True)
    # A job that failed retryably waits here before it can be polled again (backoff).
    available_at = models.DateTimeField(default=timezone.now)

    error_code = models.CharField(max_length=64, null=True, blank=True)
    error_message = models.TextField(null=True, blank=True)

    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "ai_runtime_job"
        verbose_name = "AI runtime job"
        indexes = [
            models.Index(fields=["status"], name="ai_job_status"),
            models.Index(fields=["job_type"], name="ai_job_type"),
            models.Index(fields=["target_type", "target_id"], name="ai_job_target"),
            models.Index(fields=["user", "-created_at"], name="ai_job_user_created"),
            # The queue: poll and claim read pending rows in this order, and only them.
            models.Index(
                fields=["priority", "created_at", "id"],
                name="ai_job_pending_queue",
                condition=Q(status="pending"),
            ),
            # The reaper walks the few leased rows by id, never the whole table.
            models.Index(fields=["id"], name="ai_job_leased", condition=Q(status__in=["locked", "running", "expired"])),
            # /metrics and the dashboard: pending jobs counted by type and the oldest due
            # one found from the index alone, however long the table's history.
            models.Index(
                fields=["job_type", "created_at"],
                include=["available_at"],
                name="ai_job_pending_by_type",
                condition=Q(status="pending"),
            ),
            # Finished jobs by minute and outcome (the dashboard), and retention's sweep.
            models.Index(
                fields=["finished_at"],
                include=["status", "error_code"],
                name="ai_job_finished",
                condition=Q(finished_at__isnull=False),
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "job_type", "target_type", "target_id", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="ai_job_idempotency",
            ),
            models.CheckConstraint(condition=Q(status__in=JobStatus.values), name="ai_job_status_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.job_type} [{self.status}]"


class AiJobSnapshot(UserPublicId, models.Model):
    """What the runtime is given to analyse: built from the user's learning data for
    one target, versioned by ``schema_version``, rebuilt once ``expires_at`` passes."""

    id = models.CharField(primary_key=True, max_length=40, default=partial(new_id, "snap"), editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    target_type = models.CharField(max_length=32, choices=TargetType.choices)
    target_id = models.CharField(max_length=64)
    schema_version = models.CharField(max_length=16, default="v1")
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "ai_job_snapshot"
        verbose_name = "AI job snapshot"
        indexes = [
            models.Index(fields=["user", "target_type", "target_id"], name="ai_snapshot_target"),
            models.Index(fields=["created_at"], name="ai_snapshot_created"),  # retention's sweep
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.target_type}:{self.target_id}"


class AiRuntimeResult(models.Model):
    """The one accepted output of a job."""

    id = models.CharField(primary_key=True, max_length=40, default=partial(new_id, "res"), editable=False)
    job = models.OneToOneField(AiRuntimeJob, on_delete=models.CASCADE, related_name="result")
    attempt_no = models.IntegerField()
    idempotency_key = models.CharField(max_length=160, unique=True, help_text="jobId:attemptNo:outputHash")
    output_hash = models.CharField(max_length=64)
    output_schema_version = models.CharField(max_length=16)
    output = models.JSONField()
    prompt_tokens = models.IntegerField(default=0)
    completion_tokens = models.IntegerField(default=0)
    total_tokens = models.IntegerField(default=0)
    cost_cents = models.DecimalField(max_digits=14, decimal_places=4, default=0)
    runtime_instance_id = models.CharField(max_length=128)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "ai_runtime_result"
        verbose_name = "AI runtime result"

    def __str__(self) -> str:
        return f"{self.id} for {self.job_id}"


class AiInvocationLog(models.Model):
    """One model call a runtime made for a job: telemetry, never a secret."""

    job = models.ForeignKey(AiRuntimeJob, on_delete=models.CASCADE, related_name="invocation_logs")
    attempt_no = models.IntegerField()
    runtime_instance_id = models.CharField(max_length=128)
    provider = models.CharField(max_length=32, default="deepseek")
    model_name = models.CharField(max_length=64, blank=True, default="")
    request_id = models.CharField(max_length=128, null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    latency_ms = models.IntegerField(null=True, blank=True)
    http_status = models.IntegerField(null=True, blank=True)
    prompt_tokens = models.IntegerField(default=0)
    completion_tokens = models.IntegerField(default=0)
    total_tokens = models.IntegerField(default=0)
    cost_cents = models.DecimalField(max_digits=14, decimal_places=4, default=0)
    error_code = models.CharField(max_length=64, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "ai_invocation_log"
        verbose_name = "AI invocation log"
        constraints = [
            # A runtime that resends its logs after a network error adds nothing twice.
            models.UniqueConstraint(
                fields=["job", "attempt_no", "request_id"],
                condition=Q(request_id__isnull=False),
                name="ai_invocation_log_once",
            )
        ]

    def __str__(self) -> str:
        return f"{self.job_id}#{self.attempt_no} {self.model_name} {self.http_status}"
