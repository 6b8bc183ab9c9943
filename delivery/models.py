"""The outbox's tables, learners' devices and tenants' webhook endpoints.

``Delivery`` is one message to one receiver about one event, whatever its kind (a push
to a device, a webhook to an endpoint); ``DeliveryAttempt`` is one try of it.
"""

from __future__ import annotations

from functools import partial

from django.conf import settings
from django.db import models
from django.db.models import Q

from config.ids import new_id


def _prefixed_id(prefix: str, max_length: int = 40) -> models.CharField:
    return models.CharField(primary_key=True, max_length=max_length, default=partial(new_id, prefix), editable=False)


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"  # waiting for its next try, due at next_attempt_at
    SENDING = "sending"  # claimed by one task until claimed_until
    DELIVERED = "delivered"
    FAILED = "failed"
    DROPPED = "dropped"  # not to be sent any more (consent withdrawn, receiver gone, nowhere configured)


OPEN_STATUSES = (DeliveryStatus.PENDING, DeliveryStatus.SENDING)
FINISHED_STATUSES = (DeliveryStatus.DELIVERED, DeliveryStatus.FAILED, DeliveryStatus.DROPPED)


class Delivery(models.Model):
    """One message to one receiver about one event. At most one per
    ``(kind, event_id, receiver_id)``: the event id is what the receiver sees on every try."""

    # Ids of pushes are made in SQL from the event's batch id and the device's
    # (``queries.PUSHES_FOR_USER``), hence the longer key.
    id = _prefixed_id("dlv", max_length=64)
    kind = models.CharField(max_length=20, help_text="The sender that sends it: push, webhook")
    event_id = models.CharField(max_length=64, help_text="The event it tells of (a notice, a webhook event)")
    receiver_id = models.CharField(max_length=64, help_text="Who gets it: a device, an endpoint")
    owner_id = models.CharField(max_length=64, help_text="Whose it is: a user's key, a tenant")
    channel = models.CharField(max_length=20, blank=True, default="", help_text="ios, android; empty for webhooks")
    payload = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Not tried after this")
    last_status_code = models.IntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "delivery"
        verbose_name_plural = "deliveries"
        ordering = ["-created_at", "-id"]
        permissions = [("replay_delivery", "Can send a finished delivery again")]
        constraints = [
            models.UniqueConstraint(fields=["kind", "event_id", "receiver_id"], name="delivery_once_per_receiver")
        ]
        indexes = [
            # The dispatcher's scan of due retries and of claims whose sender died.
            models.Index(fields=["next_attempt_at"], name="delivery_due", condition=Q(status="pending")),
            models.Index(fields=["claimed_until"], name="delivery_claimed", condition=Q(status="sending")),
            models.Index(fields=["owner_id", "kind"], name="delivery_owner_open", condition=Q(status="pending")),
            models.Index(fields=["receiver_id", "-created_at"], name="delivery_receiver"),
            models.Index(fields=["event_id"], name="delivery_event"),
            models.Index(fields=["finished_at"], name="delivery_finished"),  # retention's sweep
            # A tenant's webhook deliveries, newest first (listDeliveries).
            models.Index(fields=["owner_id", "kind", "-created_at", "-id"], name="delivery_owner_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.kind} {self.status}"


class DeliveryAttempt(models.Model):
    """One try of a delivery: when, what the receiver answered, what came of it."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_rows")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)
    status_code = models.IntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=20)
    error = models.TextField(blank=True, default="")

    class Meta:
        db_table = "delivery_attempt"
        ordering = ["delivery", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="delivery_attempt_once")]

    def __str__(self) -> str:
        return f"{self.delivery_id} #{self.number} {self.outcome}"


class Platform(models.TextChoices):
    IOS = "ios"
    ANDROID = "android"


class Device(models.Model):
    """A learner's phone, by its APNs or FCM token. The token is kept to send to and
    never shown; a device belongs to whoever registered its token last."""

    id = _prefixed_id("dev")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    platform = models.CharField(max_length=10, choices=Platform.choices)
    token = models.TextField()
    token_digest = models.CharField(max_length=64, editable=False, help_text="SHA-256 of the token: its unique key")
    locale = models.CharField(max_length=35, default="en")
    app_version = models.CharField(max_length=64, blank=True, default="")
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField()
    registered_at = models.DateTimeField(help_text="Its last registration: the cap drops the oldest")
    last_push_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "delivery_device"
        ordering = ["-registered_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["platform", "token_digest"], name="delivery_device_token")]
        indexes = [models.Index(fields=["user", "-registered_at", "-id"], name="delivery_device_user")]

    def __str__(self) -> str:
        return f"{self.id} {self.platform} …{self.token_suffix}"

    @property
    def token_suffix(self) -> str:
        return self.token[-6:]


class WebhookEvent(models.TextChoices):
    TASK_SUCCEEDED = "task.succeeded"
    TASK_FAILED = "task.failed"


class WebhookEndpoint(models.Model):
    """Where a tenant hears of its tasks (contract section 11.3). The owner is a plain
    value (the tenant's id): this app knows no tenant. The signing secret is kept
    sealed with the platform's keyring; during a rotation the previous one signs too
    until ``previous_secret_until``."""

    id = _prefixed_id("ep")
    owner_id = models.CharField(max_length=64, help_text="The tenant it belongs to")
    url = models.CharField(max_length=2048)
    events = models.JSONField(default=list, help_text="task.succeeded, task.failed")
    description = models.CharField(max_length=500, blank=True, default="")
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=200, blank=True, default="")
    secret_encrypted = models.TextField(editable=False)
    previous_secret_encrypted = models.TextField(blank=True, default="", editable=False)
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    failing_since = models.DateTimeField(
        null=True, blank=True, help_text="Its first failed try since its last delivered one"
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "delivery_webhook_endpoint"
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["owner_id", "created_at", "id"], name="delivery_endpoint_owner")]

    def __str__(self) -> str:
        return f"{self.id} {self.url}"
