"""Per-user AI settings and daily usage, the platform's daily budget, and the
circuit breaker that guards the platform key."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.timezone import now


class ApiKeyMode(models.TextChoices):
    """Whose model key a job uses; a user's usage is counted per mode."""

    PLATFORM_KEY = "platform_key"
    USER_DEEPSEEK_KEY = "user_deepseek_key"


def _default_max_jobs() -> int:
    return settings.AI_DEFAULT_MAX_DAILY_JOBS


def _default_max_tokens() -> int:
    return settings.AI_DEFAULT_MAX_DAILY_TOKEN_BUDGET


def _default_enabled() -> bool:
    return settings.AI_ANALYSIS_ENABLED_BY_DEFAULT


def validate_timezone(value: str) -> None:
    """An IANA time zone name (a bad one would fail every later use of the row)."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError("Not an IANA time zone name, such as Asia/Shanghai.") from None


class UserAiSettings(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ai_settings")
    ai_analysis_enabled = models.BooleanField(default=_default_enabled)
    timezone = models.CharField(
        max_length=64,
        default="UTC",
        validators=[validate_timezone],
        help_text="IANA name; decides the user's localDate",
    )
    default_api_key_mode = models.CharField(max_length=32, choices=ApiKeyMode.choices, default=ApiKeyMode.PLATFORM_KEY)
    max_daily_ai_jobs = models.PositiveIntegerField(default=_default_max_jobs)
    max_daily_token_budget = models.PositiveBigIntegerField(default=_default_max_tokens)
    # Counts the changes of timezone that moved the user to another local date: a job
    # reserved under an older count cannot land on a day the user has left since.
    quota_epoch = models.PositiveIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(default=now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "quota_user_ai_settings"
        verbose_name = "user AI settings"
        verbose_name_plural = "users' AI settings"

    def __str__(self) -> str:
        return f"AI settings of {self.user_id}"


class UserAiUsage(models.Model):
    """What counts against one of a user's local days, per key mode (the two modes are
    counted apart). A change of timezone to another local date leaves this day:
    ``moved_to`` names the day arrived in (which took over this one's counters), and
    ``left_epoch`` the user's ``quota_epoch`` from then on."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ai_usage")
    local_date = models.DateField()
    api_key_mode = models.CharField(max_length=32, choices=ApiKeyMode.choices)
    job_count = models.PositiveIntegerField(default=0)
    tokens_used = models.PositiveBigIntegerField(default=0)
    cost_cents = models.DecimalField(max_digits=16, decimal_places=4, default=0)
    moved_to = models.DateField(
        null=True,
        blank=True,
        help_text="The day a change of timezone moved the user to: tokens landing here count there too",
    )
    left_epoch = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The user's quota epoch since they left this day: a job reserved before is refused",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "quota_user_ai_usage"
        constraints = [
            models.UniqueConstraint(fields=["user", "local_date", "api_key_mode"], name="quota_usage_per_user_day_mode")
        ]
        indexes = [models.Index(fields=["local_date"], name="quota_usage_local_date")]  # retention's

    def __str__(self) -> str:
        return f"{self.user_id} {self.local_date} {self.api_key_mode}: {self.job_count} jobs, {self.tokens_used} tokens"


PLATFORM_USAGE_SHARDS = 16


class PlatformDailyUsage(models.Model):
    """Platform-key tokens and cost of one platform day (``PLATFORM_TIMEZONE``), spread
    over a few shard rows so concurrent results do not all queue for one row lock; a
    day's total is the sum."""

    day = models.DateField()
    shard = models.PositiveSmallIntegerField()
    tokens_used = models.PositiveBigIntegerField(default=0)
    cost_cents = models.DecimalField(max_digits=16, decimal_places=4, default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "quota_platform_daily_usage"
        constraints = [models.UniqueConstraint(fields=["day", "shard"], name="quota_platform_usage_shard")]

    def __str__(self) -> str:
        return f"{self.day}#{self.shard}: {self.tokens_used} tokens, {self.cost_cents} cents"


class CircuitState(models.TextChoices):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class PlatformCircuitBreaker(models.Model):
    """The one breaker of the platform key (a single row, id 1)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    state = models.CharField(max_length=16, choices=CircuitState.choices, default=CircuitState.CLOSED)
    consecutive_failures = models.PositiveIntegerField(default=0)
    changed_at = models.DateTimeField(default=now)
    changed_by = models.CharField(max_length=150, default="system")
    reason = models.TextField(blank=True, default="")

    class Meta:
        db_table = "quota_platform_circuit_breaker"
        verbose_name = "platform circuit breaker"

    def __str__(self) -> str:
        return f"circuit {self.state} ({self.consecutive_failures} consecutive failures)"


class CircuitBreakerEvent(models.Model):
    """Every change of the breaker's state: who, when, why."""

    from_state = models.CharField(max_length=16, choices=CircuitState.choices)
    to_state = models.CharField(max_length=16, choices=CircuitState.choices)
    actor = models.CharField(max_length=150)
    reason = models.TextField()
    consecutive_failures = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=now)

    class Meta:
        db_table = "quota_circuit_breaker_event"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["created_at"], name="quota_breaker_event_created")]  # retention's

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.from_state} → {self.to_state} by {self.actor}"


class ThrottleWindow(models.Model):
    """A throttle's fixed window when no Redis is configured (``quotas.throttles``):
    counted in the database every web process shares. Rows of ended windows are
    swept as new ones start."""

    window_key = models.CharField(primary_key=True, max_length=128)
    count = models.PositiveIntegerField(default=0)
    expires_at = models.FloatField(help_text="epoch seconds")

    class Meta:
        db_table = "quotas_throttle_window"
        indexes = [models.Index(fields=["expires_at"], name="quotas_throttle_expires")]

    def __str__(self) -> str:
        return f"{self.window_key}: {self.count}"
