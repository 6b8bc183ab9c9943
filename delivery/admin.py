"""The outbox in Django admin: learners' devices (the token shown by its last
characters only) and every delivery with its attempts, read-only. Deleting a device
goes through the service: its unsent pushes are dropped with it."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from delivery.models import Delivery, DeliveryAttempt, Device
from delivery.services import devices


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
        "id", "kind", "channel", "event_id", "receiver_id", "status", "attempts", "last_status_code",
        "next_attempt_at", "created_at", "finished_at",
    ]  # fmt: skip
    list_filter = ["kind", "status", "channel"]
    search_fields = ["id", "event_id", "receiver_id", "owner_id"]
    ordering = ["-created_at", "-id"]
    show_full_result_count = False
    inlines = [AttemptInline]

    def get_readonly_fields(self, request: HttpRequest, obj: Delivery | None = None) -> list[str]:
        return [field.name for field in Delivery._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Delivery | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Delivery | None = None) -> bool:
        return False
