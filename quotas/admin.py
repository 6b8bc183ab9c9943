"""Operators' controls: the circuit breaker, the platform's day, users' settings and usage."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path, reverse

from ai_jobs.selectors import active_platform_jobs
from quotas import services
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


@admin.register(PlatformCircuitBreaker)
class PlatformCircuitBreakerAdmin(admin.ModelAdmin):
    """One row; its page is the control panel (state, today's budget, history)."""

    list_display = ["state", "consecutive_failures", "changed_at", "changed_by", "reason"]

    def get_urls(self) -> list[Any]:
        return [
            path("", self.admin_site.admin_view(self.control_view), name="quotas_breaker_control"),
            *super().get_urls(),
        ]

    def control_view(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST":
            if not self.has_change_permission(request):
                return HttpResponse(status=403)
            form = BreakerForm(request.POST)
            if form.is_valid():
                changed = services.breaker_transition(
                    to=form.cleaned_data["to_state"],
                    actor=request.user.get_username(),
                    reason=form.cleaned_data["reason"],
                )
                if changed:
                    self.message_user(request, f"Circuit breaker is now {form.cleaned_data['to_state']}.")
                else:
                    self.message_user(request, "The breaker was already in that state.", messages.WARNING)
                return HttpResponseRedirect(reverse("admin:quotas_breaker_control"))
        else:
            form = BreakerForm()
        context = {
            **self.admin_site.each_context(request),
            "title": "Platform circuit breaker",
            "breaker": services.breaker_get(),
            "usage": services.platform_usage_today(),
            "active_platform_jobs": active_platform_jobs(),
            "events": CircuitBreakerEvent.objects.all()[:50],
            "form": form,
            "opts": self.model._meta,
        }
        return render(request, "admin/quotas/breaker_control.html", context)

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


@admin.register(UserAiSettings)
class UserAiSettingsAdmin(admin.ModelAdmin):
    list_display = [
        "user",
        "ai_analysis_enabled",
        "timezone",
        "default_api_key_mode",
        "max_daily_ai_jobs",
        "max_daily_token_budget",
    ]
    list_filter = ["ai_analysis_enabled", "default_api_key_mode"]
    search_fields = ["user__username"]
    raw_id_fields = ["user"]


@admin.register(UserAiUsage)
class UserAiUsageAdmin(admin.ModelAdmin):
    list_display = ["user", "local_date", "api_key_mode", "job_count", "tokens_used", "cost_cents"]
    list_filter = ["api_key_mode", "local_date"]
    search_fields = ["user__username"]
    date_hierarchy = "local_date"

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in UserAiUsage._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(PlatformDailyUsage)
class PlatformDailyUsageAdmin(admin.ModelAdmin):
    list_display = ["day", "shard", "tokens_used", "cost_cents", "updated_at"]
    list_filter = ["day"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
