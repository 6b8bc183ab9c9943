"""Deleting a user in the admin deletes everything of theirs; django-axes' pages of
admin logins, their one action behind the permission it needs.

Several of the apps' admin pages refuse deletion on their own (outputs are
read-only history, credentials are soft-deleted by an action), and Django's admin
refuses to delete a user while any cascaded row's page says no. Whoever may delete
users may delete what is theirs along with them: the refusal of those pages is about
deleting such rows one by one, not about a user leaving. The admin's log of the
deletion names the account by its number only."""

from __future__ import annotations

from typing import Any

from axes.admin import AccessAttemptAdmin, AccessFailureLogAdmin, AccessLogAdmin
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin, messages
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.http import HttpRequest

from accounts.admin import AccountUserAdmin
from ops.admin_login import login_attempts_clean_expired


class UserWithEverythingAdmin(AccountUserAdmin):
    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, Any, set[str], Any]:
        to_delete, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        if self.has_delete_permission(request):
            perms_needed = set()
        return to_delete, model_count, perms_needed, protected

    def log_deletions(self, request: HttpRequest, queryset: Any) -> list[LogEntry]:
        # The operator's record says which account went and who deleted it, not the
        # person's name: nothing of theirs stays behind, not even in the admin's log.
        content_type = ContentType.objects.get_for_model(self.model)
        return LogEntry.objects.bulk_create(
            LogEntry(
                user_id=request.user.pk,
                content_type=content_type,
                object_id=str(obj.pk),
                object_repr=f"user #{obj.pk}",
                action_flag=DELETION,
                change_message="Deleted with everything of theirs",
            )
            for obj in queryset
        )


_User = get_user_model()
if admin.site.is_registered(_User) and type(admin.site.get_model_admin(_User)) is AccountUserAdmin:
    admin.site.unregister(_User)
    admin.site.register(_User, UserWithEverythingAdmin)


class LoginAttemptAdmin(AccessAttemptAdmin):
    """axes' page of login attempts. Cleaning them up deletes rows, so it needs the
    permission to delete them (axes' own action declares none, and reads the cool-off
    from a request attribute only a login has)."""

    @admin.action(description="Clean up expired attempts", permissions=["delete"])
    def cleanup_expired_attempts(self, request: HttpRequest, queryset: Any) -> None:
        deleted = login_attempts_clean_expired()
        self.message_user(request, f"Cleaned up {deleted} expired login attempts.", messages.SUCCESS)


admin.site.register(AccessAttempt, LoginAttemptAdmin)
admin.site.register(AccessLog, AccessLogAdmin)
admin.site.register(AccessFailureLog, AccessFailureLogAdmin)
