"""Operators' view of the queue: filter jobs, rerun failed ones, cancel. The dashboard
linked from the job list is ``ops.dashboard``'s."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from ai_jobs import selectors, services
from ai_jobs.admin_operations import BulkOperationsFromTheList, ErrorCodeFilter, UserFilter
from ai_jobs.models import AiInvocationLog, AiJobSnapshot, AiRuntimeJob, AiRuntimeResult, JobStatus, TargetType
from config import formatting
from config.admin_actions import permission_check
from config.errors import DomainError

STATUS_CLASSES = {
    JobStatus.PENDING: "waiting",
    JobStatus.LOCKED: "busy",
    JobStatus.RUNNING: "busy",
    JobStatus.EXPIRED: "warn",
    JobStatus.SUCCEEDED: "ok",
    JobStatus.FAILED: "bad",
    JobStatus.CANCELLED: "muted",
}


def status_badge(status: str) -> str:
    return format_html('<span class="job-status {}">{}</span>', STATUS_CLASSES.get(status, "muted"), status)


def job_link(job_id: str | None, *, arrow: str = "") -> str:
    if not job_id:
        return ""
    url = reverse("admin:ai_jobs_airuntimejob_change", args=[job_id])
    return format_html('{}<a class="job-id" href="{}">{}</a>', arrow, url, job_id)


class TokensAndCost:
    """Token counts with separators and money in dollars, for the result and log pages."""

    @admin.display(description="tokens", ordering="total_tokens")
    def tokens(self, row: AiRuntimeResult | AiInvocationLog) -> str:
        return formatting.count(row.total_tokens)

    @admin.display(description="cost", ordering="cost_cents")
    def cost(self, row: AiRuntimeResult | AiInvocationLog) -> str:
        return formatting.dollars(row.cost_cents)


class ReadOnlyInline:
    """What a job holds is written by the protocol, never by hand."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ResultInline(TokensAndCost, ReadOnlyInline, admin.StackedInline):
    model = AiRuntimeResult
    fields = [
        "id",
        "attempt_no",
        "output_schema_version",
        "tokens",
        "cost",
        "runtime_instance_id",
        "created_at",
        "output_json",
    ]
    readonly_fields = fields

    @admin.display(description="output")
    def output_json(self, result: AiRuntimeResult) -> str:
        return formatting.pretty_json(result.output)

    @admin.display(description="tokens (prompt + completion)")
    def tokens(self, result: AiRuntimeResult) -> str:
        return (
            f"{formatting.count(result.total_tokens)} "
            f"({formatting.count(result.prompt_tokens)} + {formatting.count(result.completion_tokens)})"
        )


class InvocationLogInline(TokensAndCost, ReadOnlyInline, admin.TabularInline):
    model = AiInvocationLog
    fields = [
        "attempt_no",
        "runtime_instance_id",
        "model_name",
        "http_status",
        "latency_ms",
        "tokens",
        "cost",
        "error_code",
        "started_at",
    ]
    readonly_fields = fields


@admin.register(AiRuntimeJob)
class AiRuntimeJobAdmin(BulkOperationsFromTheList, admin.ModelAdmin):
    """Jobs are written by the state machine only: every page is read-only (no Save,
    no Delete), and what an operator may do is an action (rerun, cancel) or the Rerun
    button on a failed job's page. The list is compact: two lines a row, so it fits
    1,400 pixels beside its filters.

    Cancelling changes jobs (``change_airuntimejob``); a rerun makes a new job
    (``add_airuntimejob``, which no page of its own grants: jobs are never added by hand)."""

    list_display = ["job", "status_badge", "who", "error", "lineage"]
    list_display_links = None  # the job column carries its own link
    list_filter = ["status", "job_type", ErrorCodeFilter, "api_key_mode", "cancel_requested", "target_type", UserFilter]
    search_fields = list(selectors.JOB_SEARCH_FIELDS)
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    actions = ["rerun_failed", "cancel_jobs"]
    inlines = [ResultInline, InvocationLogInline]
    list_select_related = ["user"]
    show_full_result_count = False
    change_list_template = "admin/ai_jobs/airuntimejob/change_list.html"
    change_form_template = "admin/ai_jobs/airuntimejob/change_form.html"
    fieldsets = [
        (None, {"fields": ["id", "job_type", "status", "user", ("target_type", "target_id"), "params"]}),
        ("Outcome", {"fields": ["error_code", "error_message", ("started_at", "finished_at"), "usage"]}),
        ("Lineage", {"fields": ["retried_from_job", "rerun_as"]}),
        (
            "Attempts",
            {
                "fields": [
                    ("attempt_no", "retry_count", "max_retry_count"),
                    ("timeout_seconds", "available_at"),
                    ("locked_by", "locked_at", "lock_until"),
                    "cancel_requested",
                ]
            },
        ),
        (
            "Model and key",
            {
                "fields": [
                    ("api_key_mode", "credential_id"),
                    ("model_provider", "model_name"),
                    ("prompt_version", "output_schema_version"),
                ],
                "classes": ["collapse"],
            },
        ),
        (
            "Record",
            {
                "fields": ["priority", "idempotency_key", "quota_date", "snapshot", ("created_at", "updated_at")],
                "classes": ["collapse"],
            },
        ),
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: AiRuntimeJob | None = None) -> list[str]:
        # Status and lease only ever change through the state machine.
        return [*(f.name for f in AiRuntimeJob._meta.fields), "usage"]

    @admin.display(description="what it cost")
    def usage(self, job: AiRuntimeJob) -> str:
        """Every model call of every attempt, as ``usage`` in the user API."""
        spent = selectors.job_usage(job)
        return (
            f"{formatting.count(spent.calls)} call(s) · {formatting.count(spent.total_tokens)} tokens "
            f"({formatting.count(spent.prompt_tokens)} + {formatting.count(spent.completion_tokens)}) · "
            f"{formatting.dollars(spent.cost_cents)}"
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AiRuntimeJob | None = None) -> bool:
        # The list's actions need it; a job's own page has nothing to save.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: AiRuntimeJob | None = None) -> bool:
        return False  # finished history goes with retention, not by hand

    has_rerun_permission = permission_check("ai_jobs.add_airuntimejob")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        extra = {"title": "Jobs", "bulk_links": self.bulk_links(request)}
        return super().changelist_view(request, {**extra, **(extra_context or {})})

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        job = AiRuntimeJob.objects.filter(pk=object_id).only("status").first()
        extra = {
            "status_badge": status_badge(job.status) if job else "",
            "can_rerun": self.has_rerun_permission(request),
        }
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), **extra})

    # --- the list's columns -------------------------------------------------------------

    @admin.display(description="job · created", ordering="created_at")
    def job(self, job: AiRuntimeJob) -> str:
        created = timezone.localtime(job.created_at).strftime("%m-%d %H:%M:%S")
        return format_html('{}<div class="sub">{} · {}</div>', job_link(job.id), job.job_type, created)

    @admin.display(description="status · attempt", ordering="status")
    def status_badge(self, job: AiRuntimeJob) -> str:
        flag = format_html(' <span class="sub">{}</span>', "cancel requested") if job.cancel_requested else ""
        return format_html(
            '{}{}<div class="sub">attempt {} · retries {} of {}</div>',
            status_badge(job.status),
            flag,
            job.attempt_no,
            job.retry_count,
            job.max_retry_count,
        )

    @admin.display(description="user · target")
    def who(self, job: AiRuntimeJob) -> str:
        if job.target_type == TargetType.USER:  # the user themselves
            return format_html('{}<div class="sub">the user</div>', job.user)
        return format_html(
            '{}<div class="sub">{}</div><div class="sub mono">{}</div>', job.user, job.target_type, job.target_id
        )

    @admin.display(description="error", ordering="error_code")
    def error(self, job: AiRuntimeJob) -> str:
        if not job.error_code:
            return "—"
        return format_html('<span class="error-code" title="{}">{}</span>', job.error_message or "", job.error_code)

    @admin.display(description="retried from · rerun as")
    def lineage(self, job: AiRuntimeJob) -> str:
        parts = [job_link(job.retried_from_job_id, arrow="↩ "), job_link(job.rerun_as_id, arrow="↪ ")]
        return format_html_join("", "<div>{}</div>", ((part,) for part in parts if part)) or "—"

    # --- what operators do ----------------------------------------------------------------

    def get_urls(self) -> list[Any]:
        return [
            *self.bulk_urls(),  # before the rerun of one job, whose id could read "bulk"
            path(
                "<path:object_id>/rerun/",
                self.admin_site.admin_view(self.rerun_view),
                name="ai_jobs_airuntimejob_rerun",
            ),
            *super().get_urls(),
        ]

    def rerun_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The Rerun button of a failed job's page (POST): the new job's page, or this
        page again with the reason it was refused."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_rerun_permission(request):
            raise PermissionDenied
        job = get_object_or_404(AiRuntimeJob.objects.select_related("user"), pk=object_id)
        try:
            rerun = services.job_rerun(job=job)
        except DomainError as error:
            self.message_user(request, f"Not rerun: {error.message}.", messages.ERROR)
            return HttpResponseRedirect(reverse("admin:ai_jobs_airuntimejob_change", args=[job.pk]))
        self.message_user(request, f"Job {job.pk} rerun as {rerun.pk}, pending.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:ai_jobs_airuntimejob_change", args=[rerun.pk]))

    @admin.action(description="Rerun selected failed jobs (as new jobs)", permissions=["rerun"])
    def rerun_failed(self, request: HttpRequest, queryset: QuerySet[AiRuntimeJob]) -> None:
        reruns = services.jobs_rerun(job_ids=list(queryset.values_list("id", flat=True)))
        for error in [*reruns.refused.values(), *reruns.skipped.values()][:10]:
            self.message_user(request, f"Not rerun: {error.message}.", messages.WARNING)
        self.message_user(
            request,
            f"{len(reruns.created)} job(s) rerun as new jobs; {len(reruns.refused)} refused; "
            f"{len(reruns.skipped)} skipped (not failed, or rerun already).",
        )

    @admin.action(description="Cancel selected jobs", permissions=["change"])
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[AiRuntimeJob]) -> None:
        ids = list(queryset.values_list("id", flat=True))
        cancelled, requested = services.jobs_cancel(job_ids=ids, reason="Cancelled by an operator")
        self.message_user(
            request,
            f"{cancelled} pending job(s) cancelled; cancellation requested for {requested} running job(s); "
            f"{len(ids) - cancelled - requested} already finished.",
        )


@admin.register(AiRuntimeResult)
class AiRuntimeResultAdmin(TokensAndCost, admin.ModelAdmin):
    list_display = [
        "id",
        "job",
        "attempt_no",
        "output_schema_version",
        "tokens",
        "cost",
        "runtime_instance_id",
        "created_at",
    ]
    search_fields = ["id", "job__id", "runtime_instance_id"]
    list_filter = ["output_schema_version", "job__job_type"]
    raw_id_fields = ["job"]

    def get_fields(self, request: HttpRequest, obj: AiRuntimeResult | None = None) -> list[str]:
        return [f.name if f.name != "output" else "output_json" for f in AiRuntimeResult._meta.fields]

    def get_readonly_fields(self, request: HttpRequest, obj: AiRuntimeResult | None = None) -> list[str]:
        return self.get_fields(request, obj)

    @admin.display(description="output")
    def output_json(self, result: AiRuntimeResult) -> str:
        return formatting.pretty_json(result.output)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AiRuntimeResult | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AiRuntimeResult | None = None) -> bool:
        return False


@admin.register(AiInvocationLog)
class AiInvocationLogAdmin(TokensAndCost, admin.ModelAdmin):
    list_display = [
        "job",
        "attempt_no",
        "runtime_instance_id",
        "model_name",
        "http_status",
        "latency_ms",
        "tokens",
        "cost",
        "error_code",
        "created_at",
    ]
    list_filter = ["error_code", "model_name", "http_status"]
    search_fields = ["job__id", "request_id", "runtime_instance_id"]
    raw_id_fields = ["job"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AiInvocationLog | None = None) -> bool:
        return False


@admin.register(AiJobSnapshot)
class AiJobSnapshotAdmin(admin.ModelAdmin):
    list_display = ["id", "user", "target_type", "target_id", "schema_version", "created_at", "expires_at"]
    search_fields = ["id", "user__username", "target_id"]
    raw_id_fields = ["user"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AiJobSnapshot | None = None) -> bool:
        return False  # what the model was given, as it was built: shown, never edited


from ai_jobs import admin_outputs  # noqa: E402, F401  (registers the outputs' pages)
