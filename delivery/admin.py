"""The outbox in Django admin: learners' devices (the token shown by its last characters
only), webhook endpoints, and every delivery with its tries, read-only. Deleting a device
goes through the service: its unsent pushes are dropped with it. A webhook delivery is
sent again (with its own event id) by the replay action, which needs its own permission,
``delivery.replay_delivery``. Secrets are never shown."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from config.admin_actions import permission_check
from delivery.models import Delivery, DeliveryAttempt, Device, WebhookEndpoint
from delivery.services import devices, webhooks


@admin.register(Device)
class DeviceAdmin(admin.ModelAdmin):
    list_display = [
        "id", "user", "platform", "token_suffix", "locale", "app_version", "enabled", "disabled_reason",
        "registered_at", "last_push_at",
    ]  # fmt: skip
    list_filter = ["platform", "enabled"]
    search_fields = ["id", "user__username", "user__account__public_id"]
    list_select_related = ["user"]
    ordering = ["-registered_at", "-id"]
    fields = [
        "id", "user", "platform", "token_suffix", "locale", "app_version", "enabled", "disabled_reason",
        "created_at", "registered_at", "last_push_at",
    ]  # fmt: skip
    readonly_fields = fields

    @admin.display(description="token")
    def token_suffix(self, obj: Device) -> str:
        return f"…{obj.token_suffix}"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Device | None = None) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: Device) -> None:
        devices.device_delete(user_id=obj.user_id, device_id=obj.id)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Device]) -> None:
        for device_id, user_id in queryset.values_list("id", "user_id"):
            devices.device_delete(user_id=user_id, device_id=device_id)


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


class AttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    fields = ["number", "started_at", "duration_ms", "status_code", "outcome", "error"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    """Each event's deliveries with their outcome; filter by ``event_id`` for one
    notice's pushes (a notice's page links here)."""

    list_display = [
        "id", "kind", "channel", "owner_id", "event_id", "receiver_id", "status", "attempts", "last_status_code",
        "next_attempt_at", "created_at", "finished_at",
    ]  # fmt: skip
    list_filter = ["kind", "status", "channel"]
    search_fields = ["id", "event_id", "receiver_id", "owner_id"]
    ordering = ["-created_at", "-id"]
    show_full_result_count = False
    inlines = [AttemptInline]
    actions = ["replay"]
    has_replay_permission = permission_check("delivery.replay_delivery")

    def get_readonly_fields(self, request: HttpRequest, obj: Delivery | None = None) -> list[str]:
        return [field.name for field in Delivery._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Delivery | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Delivery | None = None) -> bool:
        return False

    @admin.action(description="Send selected webhook deliveries again (same webhook-id)", permissions=["replay"])
    def replay(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        count = webhooks.webhooks_replay(delivery_ids=list(queryset.values_list("id", flat=True)))
        self.message_user(request, f"{count} webhook delivery(ies) sent again; others are pushes or being sent.")
