"""Operators' controls: the circuit breaker, the platform's day, users' settings and usage."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path, reverse

from ai_jobs import services as job_services
from ai_jobs.selectors import active_platform_jobs
from config import formatting
from quotas import selectors, services
from quotas.models import (
    CircuitBreakerEvent,
    CircuitState,
    PlatformCircuitBreaker,
    PlatformDailyUsage,
    UserAiSettings,
    UserAiUsage,
)


class BreakerForm(forms.Form):
    to_state = forms.ChoiceField(choices=CircuitState.choices, label="Move the breaker to")
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=1000)


def admission(state: str, active: int) -> str:
    """What the breaker's state means for new platform-key jobs, with those active now."""
    if state == CircuitState.HALF_OPEN:
        return f"{active} of {settings.PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS} allowed while half-open"
    if state == CircuitState.OPEN:
        return f"{active} (none admitted while open)"
    return f"{active} (no limit while closed)"


@admin.register(PlatformCircuitBreaker)
class PlatformCircuitBreakerAdmin(admin.ModelAdmin):
    """One row; its page is the control panel (state, today's budget, history): read
    with the permission to view the breaker, moved with the permission to change it."""

    list_display = ["state", "consecutive_failures", "changed_at", "changed_by", "reason"]

    def get_urls(self) -> list[Any]:
        return [
            path("", self.admin_site.admin_view(self.control_view), name="quotas_breaker_control"),
            *super().get_urls(),
        ]

    def control_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        may_change = self.has_change_permission(request)
        if request.method == "POST":
            if not may_change:
                raise PermissionDenied
            form = BreakerForm(request.POST)
            if form.is_valid():
                changed = services.breaker_transition(
                    to=form.cleaned_data["to_state"],
                    actor=request.user.get_username(),
                    reason=form.cleaned_data["reason"],
                )
                if changed:
                    self.message_user(
                        request, f"Circuit breaker is now {CircuitState(form.cleaned_data['to_state']).label}."
                    )
                else:
                    self.message_user(request, "The breaker was already in that state.", messages.WARNING)
                return HttpResponseRedirect(reverse("admin:quotas_breaker_control"))
        breaker = selectors.breaker_get()
        if request.method != "POST":
            form = BreakerForm(initial={"to_state": breaker.state})  # the select shows where it is now
        usage = selectors.platform_usage_today()
        context = {
            **self.admin_site.each_context(request),
            "title": "Platform circuit breaker",
            "breaker": breaker,
            "usage": usage,
            "tokens_today": formatting.tokens_of(usage.tokens_used, usage.token_budget),
            "cost_today": formatting.dollars_of(usage.cost_cents, usage.cost_budget_cents),
            "admission": admission(breaker.state, active_platform_jobs()),
            "failure_threshold": settings.PLATFORM_CIRCUIT_FAILURE_THRESHOLD,
            "events": CircuitBreakerEvent.objects.all()[:50],
            "form": form if may_change else None,
            "opts": self.model._meta,
        }
        return render(request, "admin/quotas/breaker_control.html", context)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # The row moves through the panel's transitions only (each one recorded as an event).
        return [f.name for f in PlatformCircuitBreaker._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(CircuitBreakerEvent)
class CircuitBreakerEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "from_state", "to_state", "actor", "reason", "consecutive_failures"]
    list_filter = ["to_state", "actor"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# The settings form's fields, by the service's keyword for each.
_SETTINGS_FIELDS = {
    "user": "user",
    "ai_analysis_enabled": "ai_analysis_enabled",
    "timezone": "timezone_name",
    "default_api_key_mode": "default_api_key_mode",
    "max_daily_ai_jobs": "max_daily_ai_jobs",
    "max_daily_token_budget": "max_daily_token_budget",
}


@admin.register(UserAiSettings)
class UserAiSettingsAdmin(admin.ModelAdmin):
    list_display = [
        "user",
        "ai_analysis_enabled",
        "timezone",
        "default_api_key_mode",
        "max_daily_ai_jobs",
        "token_budget",
    ]

    @admin.display(description="daily token budget", ordering="max_daily_token_budget")
    def token_budget(self, row: UserAiSettings) -> str:
        return formatting.count(row.max_daily_token_budget)

    list_filter = ["ai_analysis_enabled", "default_api_key_mode"]
    search_fields = ["user__username"]
    raw_id_fields = ["user"]
    fields = [*_SETTINGS_FIELDS, "created_at", "updated_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["user", "created_at", "updated_at"] if obj is not None else ["created_at", "updated_at"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A user's settings live as long as the user (they go with the user's deletion). Deleting
        # the row alone would bring it back with the defaults: consent turned off with no job
        # cancelled, or turned on for a user who had turned it off.
        return False

    def save_model(self, request: HttpRequest, obj: UserAiSettings, form: forms.ModelForm, change: bool) -> None:
        """A change goes through the service the user API calls, so it means the same
        however it is made: a new timezone takes the day's usage with it, turning AI
        analysis off cancels the user's jobs. Adding a user's row is changing the
        defaults they had until then."""
        names = form.changed_data if change else list(form.cleaned_data)
        changed = {_SETTINGS_FIELDS[name]: form.cleaned_data[name] for name in names if name in _SETTINGS_FIELDS}
        changed.pop("user", None)
        if changed or not change:
            obj.pk = job_services.ai_settings_update(user=obj.user, by_staff=True, **changed).pk


@admin.register(UserAiUsage)
class UserAiUsageAdmin(admin.ModelAdmin):
    list_display = ["user", "local_date", "api_key_mode", "jobs", "tokens", "cost"]
    list_filter = ["api_key_mode", "local_date"]
    search_fields = ["user__username"]
    date_hierarchy = "local_date"
    list_select_related = ["user__ai_settings"]

    def _limits(self, row: UserAiUsage) -> UserAiSettings:
        try:
            return row.user.ai_settings
        except UserAiSettings.DoesNotExist:  # never changed: the defaults
            return UserAiSettings(user=row.user)

    @admin.display(description="jobs (of the daily limit)", ordering="job_count")
    def jobs(self, row: UserAiUsage) -> str:
        limit = self._limits(row).max_daily_ai_jobs
        return formatting.of_budget(
            formatting.count(row.job_count), formatting.count(limit), formatting.share(row.job_count, limit)
        )

    @admin.display(description="tokens (of the daily budget)", ordering="tokens_used")
    def tokens(self, row: UserAiUsage) -> str:
        return formatting.tokens_of(row.tokens_used, self._limits(row).max_daily_token_budget)

    @admin.display(description="cost", ordering="cost_cents")
    def cost(self, row: UserAiUsage) -> str:
        return formatting.dollars(row.cost_cents)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in UserAiUsage._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(PlatformDailyUsage)
class PlatformDailyUsageAdmin(admin.ModelAdmin):
    """The platform's day in shards (their sum is the day; the breaker panel shows it)."""

    list_display = ["day", "shard", "tokens", "cost", "updated_at"]
    list_filter = ["day"]

    @admin.display(description="tokens", ordering="tokens_used")
    def tokens(self, row: PlatformDailyUsage) -> str:
        return formatting.count(row.tokens_used)

    @admin.display(description="cost", ordering="cost_cents")
    def cost(self, row: PlatformDailyUsage) -> str:
        return formatting.dollars(row.cost_cents)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
