"""Admin actions run only for the staff users allowed to run them.

Each action names, in ``@admin.action(permissions=[...])``, the Django permission that
matches what it changes; Django then leaves it out of the actions dropdown for anyone
without it. Django's own answer to a post of such an action anyway is the list again
("No action selected"); ``PermittedActionsAdmin`` answers ``403`` instead, so a refusal
is a refusal wherever it is seen. Where no standard permission says it (issuing a
tenant's key from the tenant list, rerunning a job), ``permission_check`` makes the
``has_<name>_permission`` method from the permission that does."""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse


def permission_check(perm: str) -> Callable[[Any, HttpRequest], bool]:
    """A ``has_<name>_permission`` method: whether the user holds ``perm``
    (``"app_label.codename"``)."""

    def has_permission(self: Any, request: HttpRequest) -> bool:
        return request.user.has_perm(perm)

    has_permission.__doc__ = f"Holds {perm}."
    return has_permission


class PermittedActionsAdmin(admin.ModelAdmin):
    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        if request.method == "POST" and "action" in request.POST:
            every = chain(self.actions or [], dict(self.admin_site.actions))
            declared = {found[1] for action in every if (found := self.get_action(action))}
            allowed = self.get_actions(request)
            # Every value: the form is on the page twice, and ``index`` picks one of them.
            if any(name in declared and name not in allowed for name in request.POST.getlist("action")):
                raise PermissionDenied
        return super().changelist_view(request, extra_context)
