"""What operators do to many jobs at once, and to one kind of work: pausing job types,
and bulk operations by the job list's filters (contract section 12). Each page
calls a service and says what it did; the work of a bulk operation runs in a Celery task."""

from __future__ import annotations

import datetime as dt
from functools import partial
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from ai_jobs import job_types, selectors, services, tasks
from ai_jobs.models import AiRuntimeJob, BulkOperation, BulkOperationKind, JobTypePause
from config.admin_actions import permission_check
from config.errors import DomainError, ErrorCode, RuntimeErrorCode

# --- the job list's filters, as a bulk operation's filter ----------------------------------------


class ErrorCodeFilter(admin.SimpleListFilter):
    """By error code: the codes a job can end with, a fixed list (no scan of the table)."""

    title = "error code"
    parameter_name = "error_code"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(code, code) for code in sorted(RuntimeErrorCode.codes())]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AiRuntimeJob]) -> QuerySet[AiRuntimeJob]:
        return queryset.filter(error_code=self.value()) if self.value() else queryset


class UserFilter(admin.SimpleListFilter):
    """By user (``?user=`` a username or public id): shown once chosen, as a user list
    would be too long to offer; a job's user column links to it."""

    title = "user"
    parameter_name = "user"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(self.value(), self.value())] if self.value() else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[AiRuntimeJob]) -> QuerySet[AiRuntimeJob]:
        return queryset & selectors.jobs_matching({"user": self.value()}) if self.value() else queryset


# Each parameter of the job list's URL, and the filter key it is.
_LIST_PARAMETERS = {
    "status__exact": "status",
    "job_type__exact": "job_type",
    "api_key_mode__exact": "api_key_mode",
    "target_type__exact": "target_type",
    "error_code": "error_code",
    "error_code__exact": "error_code",
    "user": "user",
    "created_at__gte": "since",
    "created_at__lt": "until",
    "q": "search",
}
_PRESENTATION = {"o", "p", "all", "e", "_changelist_filters"}  # order, page: not filters


def filter_of_list(params: QueryDict) -> dict[str, str]:
    """The job list's current filters (its URL's parameters) as a bulk operation's filter.
    A filter the operation cannot apply is refused rather than left out."""
    job_filter: dict[str, str] = {}
    hierarchy = {}
    for name, value in params.items():
        if name in _PRESENTATION or value == "":
            continue
        if name in _LIST_PARAMETERS:
            job_filter[_LIST_PARAMETERS[name]] = value
        elif name == "cancel_requested__exact":
            job_filter["cancel_requested"] = "true" if value in ("1", "true", "True") else "false"
        elif name in ("created_at__year", "created_at__month", "created_at__day"):
            hierarchy[name.rsplit("__", 1)[1]] = value
        else:
            raise DomainError(
                ErrorCode.VALIDATION_ERROR, f"The list's filter {name} cannot be used by a bulk operation"
            )
    if hierarchy:
        job_filter.update(_date_range(hierarchy))
    return services.job_filter_clean(job_filter)


def _date_range(parts: dict[str, str]) -> dict[str, str]:
    """The date hierarchy's year, month and day as a created-at range in the current time zone."""
    try:
        year, month, day = int(parts["year"]), int(parts.get("month", 1)), int(parts.get("day", 1))
        start = dt.datetime(year, month, day)
    except (KeyError, ValueError) as error:
        raise DomainError(ErrorCode.VALIDATION_ERROR, "The list's date is not a date") from error
    if "day" in parts:
        end = start + dt.timedelta(days=1)
    elif "month" in parts:
        end = (start + dt.timedelta(days=32)).replace(day=1)
    else:
        end = start.replace(year=year + 1)
    return {"since": timezone.make_aware(start).isoformat(), "until": timezone.make_aware(end).isoformat()}


# --- bulk operations from the job list ------------------------------------------------------------


class BulkOperationsFromTheList:
    """The job list's two buttons: rerun every failed job, or cancel every pending or
    running job, matching the list's current filters. A page of its own says what it
    would do and how many jobs match; its POST records the operation and queues its
    task, and answers at once."""

    admin_site: admin.AdminSite

    def bulk_urls(self) -> list[Any]:
        return [
            path("bulk/<str:kind>/", self.admin_site.admin_view(self.bulk_view), name="ai_jobs_airuntimejob_bulk"),
        ]

    def bulk_view(self, request: HttpRequest, kind: str) -> HttpResponse:
        if kind not in BulkOperationKind.values:
            return HttpResponseRedirect(reverse("admin:ai_jobs_airuntimejob_changelist"))
        if not request.user.has_perm(services.BULK_OPERATION_PERMISSION[kind]):
            raise PermissionDenied
        changelist = reverse("admin:ai_jobs_airuntimejob_changelist")
        try:
            job_filter = filter_of_list(request.GET)
        except DomainError as error:
            messages.error(request, f"No bulk operation: {error.message}.")
            return HttpResponseRedirect(f"{changelist}?{request.GET.urlencode()}")
        if request.method == "POST":
            operation = services.bulk_operation_start(kind=kind, job_filter=job_filter, by=request.user)
            transaction.on_commit(partial(tasks.run_bulk_operation.delay, operation.id))
            messages.success(
                request,
                f"Bulk operation {operation.id} started: it works in the background; this page shows its counts.",
            )
            return HttpResponseRedirect(reverse("admin:ai_jobs_bulkoperation_change", args=[operation.id]))
        context = {
            **self.admin_site.each_context(request),
            "title": "Rerun every failed job"
            if kind == BulkOperationKind.RERUN
            else "Cancel every pending or running job",
            "kind": kind,
            "job_filter": job_filter,
            "matched": services.operation_jobs(kind=kind, job_filter=job_filter).count(),
            "back": f"{changelist}?{request.GET.urlencode()}",
            "opts": AiRuntimeJob._meta,
        }
        return render(request, "admin/ai_jobs/airuntimejob/bulk_confirm.html", context)

    def bulk_links(self, request: HttpRequest) -> dict[str, str]:
        """The buttons the user may press, each with the list's current filters."""
        query = request.GET.urlencode()
        return {
            kind: f"{reverse('admin:ai_jobs_airuntimejob_bulk', args=[kind])}?{query}"
            for kind in BulkOperationKind.values
            if request.user.has_perm(services.BULK_OPERATION_PERMISSION[kind])
        }


@admin.register(BulkOperation)
class BulkOperationAdmin(admin.ModelAdmin):
    """Every bulk operation: who, when, the filter, and its counts as it works. Written
    by the operation only."""

    list_display = [
        "id",
        "kind",
        "created_by",
        "created_at",
        "filter_shown",
        "matched",
        "done",
        "refused",
        "skipped",
        "finished_at",
    ]
    list_filter = ["kind"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    list_select_related = ["created_by"]

    @admin.display(description="filter")
    def filter_shown(self, operation: BulkOperation) -> str:
        if not operation.filter:
            return "every job"
        return format_html("<code>{}</code>", ", ".join(f"{key}={value}" for key, value in operation.filter.items()))

    def get_readonly_fields(self, request: HttpRequest, obj: BulkOperation | None = None) -> list[str]:
        return [f.name for f in BulkOperation._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # started from the job list, or manage.py rerun_jobs / cancel_jobs

    def has_change_permission(self, request: HttpRequest, obj: BulkOperation | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: BulkOperation | None = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: BulkOperation | None = None) -> bool:
        # Whoever may start one, or see jobs, sees the operations.
        return super().has_view_permission(request, obj) or request.user.has_perm("ai_jobs.view_airuntimejob")


# --- pausing job types --------------------------------------------------------------------------------


@admin.register(JobTypePause)
class JobTypePauseAdmin(admin.ModelAdmin):
    """Every job type with its pause: one page, a Pause or Resume button per type for
    the holders of ``ai_jobs.pause_jobtype``."""

    has_pause_permission = permission_check("ai_jobs.pause_jobtype")

    def get_urls(self) -> list[Any]:
        return [
            path("", self.admin_site.admin_view(self.control_view), name="ai_jobs_jobtypepause_changelist"),
            *super().get_urls(),
        ]

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Whoever sees the queue sees which types are held back.
        return (
            super().has_view_permission(request, obj)
            or self.has_pause_permission(request)
            or request.user.has_perm("ai_jobs.view_airuntimejob")
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def control_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        may_pause = self.has_pause_permission(request)
        if request.method == "POST":
            if not may_pause:
                raise PermissionDenied
            self._pause_or_resume(request, request.POST.get("job_type", ""), request.POST.get("verb", ""))
            return HttpResponseRedirect(reverse("admin:ai_jobs_jobtypepause_changelist"))
        paused = {pause.job_type: pause for pause in JobTypePause.objects.all()}
        context = {
            **self.admin_site.each_context(request),
            "title": "Job types: pause and resume",
            "rows": [{"name": name, "pause": paused.get(name)} for name in job_types.names()],
            "may_pause": may_pause,
            "opts": self.model._meta,
        }
        return render(request, "admin/ai_jobs/jobtypepause/control.html", context)

    def _pause_or_resume(self, request: HttpRequest, name: str, verb: str) -> None:
        if verb not in ("pause", "resume"):
            self.message_user(request, "Pause or resume?", messages.ERROR)
            return
        try:
            if verb == "pause":
                changed = services.job_types_pause(
                    names=[name], by=request.user.get_username(), reason=request.POST.get("reason", "")[:500]
                )
            else:
                changed = services.job_types_resume(names=[name])
        except DomainError as error:
            self.message_user(request, error.message, messages.ERROR)
            return
        if not changed:
            self.message_user(request, f"Job type {name} was already {'paused' if verb == 'pause' else 'not paused'}.")
            return
        LogEntry.objects.create(
            user_id=request.user.pk,
            content_type_id=ContentType.objects.get_for_model(JobTypePause).pk,
            object_id=name,
            object_repr=name,
            action_flag=ADDITION if verb == "pause" else DELETION,
            change_message=f"Job type {name} {verb}d",
        )
        self.message_user(request, f"Job type {name} {verb}d: every web process follows within seconds.")
