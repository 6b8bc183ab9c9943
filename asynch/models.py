"""model-asynch: tenants and their API keys, model configs
(``asynch_models``), tasks (``asynch_task``) and daily call statistics
(``asynch_model_stat``). Task states change only in ``asynch.transitions``."""

from __future__ import annotations

from functools import partial

from django.db import models
from django.db.models import Q
from django.utils import timezone

from config.ids import new_id


class Tenant(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=partial(new_id, "ten"), editable=False)
    name = models.CharField(max_length=128, unique=True)
    is_admin = models.BooleanField(default=False, help_text="May manage model configs and read every statistic")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "asynch_tenant"

    def __str__(self) -> str:
        return self.name


class TenantApiKey(models.Model):
    """An ``X-Api-Key``: only its SHA-256 is stored (the key is 256 random bits,
    so a fast hash is enough); ``prefix`` lets an operator tell keys apart."""

    id = models.CharField(primary_key=True, max_length=40, default=partial(new_id, "key"), editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    prefix = models.CharField(max_length=16, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    revoked = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "asynch_tenant_api_key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.tenant_id})"


class HttpMethod(models.TextChoices):
    GET = "GET"
    POST = "POST"


class AsynchModel(models.Model):
    """One model service: where and how to call it, and the limits around it."""

    id = models.CharField(primary_key=True, max_length=40, default=partial(new_id, "mdl"), editable=False)
    model_name = models.CharField(max_length=128, unique=True)
    base_url = models.CharField(max_length=512)
    route = models.CharField(max_length=512, blank=True, default="")
    http_method = models.CharField(max_length=8, choices=HttpMethod.choices, default=HttpMethod.POST)
    # ``Key:Value,Key2:Value2`` request headers, AES-256-GCM encrypted (asynch.crypto).
    api_key_encrypted = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True)
    max_concurrency = models.PositiveIntegerField(default=5)
    queue_limit = models.PositiveIntegerField(default=20, help_text="0: no limit")
    timeout_seconds = models.PositiveIntegerField(default=1800)
    retry_times = models.PositiveIntegerField(default=3)
    retry_queue_max_seconds = models.PositiveIntegerField(default=600)
    auto_clean_seconds = models.PositiveIntegerField(default=3600)
    remark = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "asynch_models"
        verbose_name = "model config"

    def __str__(self) -> str:
        return self.model_name


class TaskState(models.IntegerChoices):
    QUEUED = 0, "queued"
    RUNNING = 1, "running"
    SUCCEEDED = 2, "succeeded"
    FAILED = 3, "failed"
    DOWNLOADED = 4, "downloaded"


class AsynchTask(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=partial(new_id, "task"), editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="tasks")
    creator = models.CharField(max_length=255, blank=True, default="")
    biz_name = models.CharField(max_length=128, blank=True, default="")
    model_name = models.CharField(max_length=128)
    request_payload = models.JSONField(default=dict, blank=True)
    state = models.SmallIntegerField(choices=TaskState.choices, default=TaskState.QUEUED)
    # Queue order: ``priority`` 0 is the head (retries that waited long enough), 1 the rest.
    priority = models.SmallIntegerField(default=1)
    enqueue_at = models.DateTimeField(default=timezone.now)
    # A retry waiting at the tail jumps to the head at this moment (retryQueueMaxSeconds).
    jump_at = models.DateTimeField(null=True, blank=True)
    retry_count = models.IntegerField(default=0)
    # Incremented by every claim; only the holder of the current attempt may finish it.
    attempt_no = models.IntegerField(default=0)
    locked_by = models.CharField(max_length=128, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    expire_at = models.DateTimeField(null=True, blank=True)
    oss_file = models.TextField(null=True, blank=True, help_text="the stored result: storage name or OSS URL")
    http_status = models.IntegerField(null=True, blank=True)
    error_message = models.TextField(null=True, blank=True)
    # Authorization / X-User-Info captured at createTask for the OSS upload, encrypted;
    # cleared once used.
    forward_headers_encrypted = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "asynch_task"
        indexes = [
            # The queue: claims read only queued rows, in this order.
            models.Index(fields=["priority", "enqueue_at", "id"], name="asynch_task_queue", condition=Q(state=0)),
            models.Index(fields=["model_name"], name="asynch_task_queued_model", condition=Q(state=0)),
            models.Index(fields=["lease_until"], name="asynch_task_running", condition=Q(state=1)),
            models.Index(fields=["jump_at"], name="asynch_task_jump", condition=Q(state=0, priority=1)),
            models.Index(fields=["model_name", "finished_at"], name="asynch_task_failed", condition=Q(state=3)),
            models.Index(fields=["expire_at"], name="asynch_task_downloaded", condition=Q(state=4)),
            models.Index(fields=["tenant", "-created_at"], name="asynch_task_tenant"),
            # /metrics and the dashboard count tasks by state and model: running and
            # succeeded-not-yet-picked-up ones from these (queued and failed have theirs above).
            models.Index(fields=["model_name", "tenant"], name="asynch_task_running_model", condition=Q(state=1)),
            models.Index(fields=["model_name"], name="asynch_task_succeeded_model", condition=Q(state=2)),
            # Retention: succeeded tasks nobody picked up, oldest first.
            models.Index(fields=["finished_at"], name="asynch_task_unclaimed", condition=Q(state=2)),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(state__in=TaskState.values), name="asynch_task_state_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.model_name} [{self.state}]"


class AsynchTaskAnswer(models.Model):
    """A model's answer to a task, kept from the moment it arrives until its result
    file is stored: a failed upload is retried, across cleaner runs,
    without calling the model again. Deleted with the task's success or the task."""

    task = models.OneToOneField(AsynchTask, primary_key=True, on_delete=models.CASCADE, related_name="+")
    content = models.BinaryField()
    content_type = models.CharField(max_length=255, default="application/octet-stream")
    http_status = models.IntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "asynch_task_answer"

    def __str__(self) -> str:
        return f"answer of {self.task_id} ({len(self.content)} bytes)"


class AsynchModelStat(models.Model):
    """Real model calls per day, tenant, creator and model."""

    day = models.DateField()
    tenant_id = models.CharField(max_length=40)
    creator = models.CharField(max_length=255, blank=True, default="")
    model_name = models.CharField(max_length=128)
    request_count = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "asynch_model_stat"
        verbose_name = "daily model statistic"
        constraints = [
            models.UniqueConstraint(fields=["day", "tenant_id", "creator", "model_name"], name="asynch_model_stat_key")
        ]
        indexes = [models.Index(fields=["day", "model_name"], name="asynch_stat_day_model")]

    def __str__(self) -> str:
        return f"{self.day} {self.tenant_id} {self.model_name}: {self.request_count}"
