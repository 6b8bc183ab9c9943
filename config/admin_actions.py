"""Admin actions run only for the staff users allowed to run them, on every admin page.

Each action names, in ``@admin.action(permissions=[...])``, the Django permission that
matches what it changes; Django then leaves it out of the actions dropdown for anyone
without it. Django's own answer to a post of such an action anyway is the list again
("No action selected"); the project's admin site (``AdminSite``, the default site through
``AdminConfig``) answers ``403`` instead, on every page, the libraries' included, so a
refusal is a refusal wherever it is seen. Where no standard permission says it (issuing
a tenant's key from the tenant list, rerunning a job), ``permission_check`` makes the
``has_<name>_permission`` method from the permission that does."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from itertools import chain
from typing import Any

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig as DjangoAdminConfig
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse


def permission_check(perm: str) -> Callable[[Any, HttpRequest], bool]:
    """A ``has_<name>_permission`` method: whether the user holds ``perm``
    (``"app_label.codename"``)."""

    def has_permission(self: Any, request: HttpRequest) -> bool:
        return request.user.has_perm(perm)

    has_permission.__doc__ = f"Holds {perm}."
    return has_permission


def action_refused(model_admin: admin.ModelAdmin, request: HttpRequest) -> bool:  # type: ignore[type-arg]
    """Whether ``request`` posts an action of the page that its user may not run."""
    if request.method != "POST" or "action" not in request.POST:
        return False
    every = chain(model_admin.actions or [], dict(model_admin.admin_site.actions))
    declared = {found[1] for action in every if (found := model_admin.get_action(action))}
    allowed = model_admin.get_actions(request)
    # Every value: the form is on the page twice, and ``index`` picks one of them.
    return any(name in declared and name not in allowed for name in request.POST.getlist("action"))


class AdminSite(admin.AdminSite):
    site_header = "AI job platform"
    site_title = "AI job platform admin"

    def admin_view(self, view: Callable[..., HttpResponse], cacheable: bool = False) -> Callable[..., HttpResponse]:
        model_admin = getattr(view, "__self__", None)
        if isinstance(model_admin, admin.ModelAdmin) and getattr(view, "__name__", "") == "changelist_view":
            changelist = view

            @wraps(changelist)
            def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
                if action_refused(model_admin, request):
                    raise PermissionDenied
                return changelist(request, *args, **kwargs)

            view = guarded
        # The site's own checks (logged in, staff) come first: they wrap what is given here.
        return super().admin_view(view, cacheable)


class AdminConfig(DjangoAdminConfig):
    """``django.contrib.admin`` with ``AdminSite`` as ``admin.site``."""

    default_site = "config.admin_actions.AdminSite"
