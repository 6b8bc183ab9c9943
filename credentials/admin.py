"""Operators see credentials by their mask, never a key nor its ciphertext; they can
test or (soft) delete them, through the services, and add or edit none."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from config.admin_actions import permission_check
from credentials import services
from credentials.models import Credential
from credentials.services import credential_test

READONLY = [
    "id",
    "user",
    "name",
    "provider",
    "base_url",
    "key_mask",
    "status",
    "key_id",
    "last_tested_at",
    "last_test_ok",
    "last_test_http_status",
    "last_test_message",
    "created_at",
    "updated_at",
    "deleted_at",
]


@admin.register(Credential)
class CredentialAdmin(admin.ModelAdmin):
    list_display = ["id", "user", "name", "provider", "key_mask", "status", "key_id", "last_tested_at", "created_at"]
    list_filter = ["status", "provider", "key_id"]
    search_fields = ["id", "user__username", "name"]
    ordering = ["-created_at"]
    list_select_related = ["user"]
    fields = READONLY  # the sealed bytes (nonce, ciphertext) are not shown at all
    readonly_fields = READONLY
    actions = ["test_credentials", "soft_delete_credentials"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a key is the user's to enter, through the API

    def has_delete_permission(self, request: HttpRequest, obj: Credential | None = None) -> bool:
        return False  # deletion is soft, through the action below

    # The soft delete is a deletion: Django's permission to delete credentials.
    has_soft_delete_permission = permission_check("credentials.delete_credential")

    # A test records its outcome on the credential (and sends the user's key to the provider).
    @admin.action(description="Test selected credentials against the provider", permissions=["change"])
    def test_credentials(self, request: HttpRequest, queryset: QuerySet[Credential]) -> None:
        ok = failed = 0
        for credential in queryset.filter(deleted_at__isnull=True):
            outcome = credential_test(credential=credential)
            ok, failed = ok + outcome.ok, failed + (not outcome.ok)
        level = messages.SUCCESS if not failed else messages.WARNING
        self.message_user(request, f"{ok} credential(s) accepted by the provider; {failed} not.", level)

    @admin.action(
        description="Delete selected credentials (soft: the sealed key is wiped)", permissions=["soft_delete"]
    )
    def soft_delete_credentials(self, request: HttpRequest, queryset: QuerySet[Credential]) -> None:
        live = list(queryset.filter(deleted_at__isnull=True))
        for credential in live:
            services.credential_delete(credential=credential)
        self.message_user(request, f"{len(live)} credential(s) deleted.")
