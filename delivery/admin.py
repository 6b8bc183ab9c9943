"""The outbox in Django admin: webhook endpoints, and every delivery with its tries.
A delivery is sent again (with its own event id) by the replay action, which needs its
own permission, ``delivery.replay_delivery``. Secrets are never shown."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from config.admin_actions import permission_check
from delivery.models import Delivery, DeliveryAttempt, WebhookEndpoint
from delivery.services import webhooks


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    list_display = ["id", "owner_id", "url", "enabled", "disabled_reason", "failing_since", "created_at"]
    list_filter = ["enabled"]
    search_fields = ["id", "owner_id", "url", "description"]
    ordering = ["-created_at"]
    fields = ["id", "owner_id", "url", "events", "description", "enabled", "disabled_reason", "failing_since",
              "previous_secret_until", "created_at", "updated_at"]  # fmt: skip
    readonly_fields = [f for f in fields if f not in ("description", "enabled")]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a tenant creates its own, and is shown the secret once

    def save_model(self, request: HttpRequest, obj: WebhookEndpoint, form: forms.ModelForm, change: bool) -> None:
        webhooks.endpoint_update(
            owner_id=obj.owner_id, endpoint_id=obj.id, description=obj.description, enabled=obj.enabled
        )


class DeliveryAttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    fields = ["number", "started_at", "duration_ms", "status_code", "outcome", "error"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "owner_id", "receiver_id", "event_id", "status", "attempts", "last_status_code",
                    "next_attempt_at", "created_at", "finished_at"]  # fmt: skip
    list_filter = ["kind", "status"]
    search_fields = ["id", "event_id", "owner_id", "receiver_id"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    inlines = [DeliveryAttemptInline]
    actions = ["replay"]
    has_replay_permission = permission_check("delivery.replay_delivery")

    def get_readonly_fields(self, request: HttpRequest, obj: Delivery | None = None) -> list[str]:
        return [f.name for f in Delivery._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Send selected webhook deliveries again (same webhook-id)", permissions=["replay"])
    def replay(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        count = webhooks.webhooks_replay(delivery_ids=list(queryset.values_list("id", flat=True)))
        self.message_user(request, f"{count} webhook delivery(ies) sent again; others are pushes or being sent.")
