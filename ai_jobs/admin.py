"""Operators' view of the queue: filter jobs, rerun failed ones, cancel. The dashboard
linked from the job list is ``ops.dashboard``'s."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from ai_jobs import services
from ai_jobs.models import AiInvocationLog, AiJobSnapshot, AiRuntimeJob, AiRuntimeResult, JobStatus
from config.errors import DomainError


class ResultInline(admin.StackedInline):
    model = AiRuntimeResult
    extra = 0
    can_delete = False
    readonly_fields = [f.name for f in AiRuntimeResult._meta.fields]


class InvocationLogInline(admin.TabularInline):
    model = AiInvocationLog
    extra = 0
    can_delete = False
    fields = [
        "attempt_no",
        "runtime_instance_id",
        "model_name",
        "http_status",
        "latency_ms",
        "total_tokens",
        "cost_cents",
        "error_code",
        "started_at",
    ]
    readonly_fields = fields


@admin.register(AiRuntimeJob)
class AiRuntimeJobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "job_type",
        "status",
        "user",
        "target_type",
        "target_id",
        "priority",
        "attempt_no",
        "retry_count",
        "error_code",
        "created_at",
    ]
    list_filter = ["status", "job_type", "api_key_mode", "cancel_requested", "target_type"]
    search_fields = ["id", "user__username", "target_id", "locked_by", "error_code"]
    raw_id_fields = ["user", "snapshot", "retried_from_job"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    actions = ["rerun_failed", "cancel_jobs"]
    inlines = [ResultInline, InvocationLogInline]
    list_select_related = ["user"]
    change_list_template = "admin/ai_jobs/airuntimejob/change_list.html"

    def get_readonly_fields(self, request: HttpRequest, obj: AiRuntimeJob | None = None) -> list[str]:
        # Status and lease only ever change through the state machine.
        return [f.name for f in AiRuntimeJob._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Rerun selected failed jobs (as new jobs)")
    def rerun_failed(self, request: HttpRequest, queryset: QuerySet[AiRuntimeJob]) -> None:
        created = 0
        for job in queryset.filter(status=JobStatus.FAILED).select_related("user"):
            try:
                services.job_rerun(job=job)
                created += 1
            except DomainError as error:
                self.message_user(request, error.message, messages.WARNING)
        skipped = queryset.count() - created
        self.message_user(request, f"{created} job(s) rerun as new jobs; {skipped} skipped (not failed).")

    @admin.action(description="Cancel selected jobs")
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[AiRuntimeJob]) -> None:
        ids = list(queryset.values_list("id", flat=True))
        cancelled, requested = services.jobs_cancel(job_ids=ids, reason="Cancelled by an operator")
        self.message_user(
            request,
            f"{cancelled} pending job(s) cancelled; cancellation requested for {requested} running job(s); "
            f"{len(ids) - cancelled - requested} already finished.",
        )


@admin.register(AiRuntimeResult)
class AiRuntimeResultAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "job",
        "attempt_no",
        "output_schema_version",
        "total_tokens",
        "cost_cents",
        "runtime_instance_id",
        "created_at",
    ]
    search_fields = ["id", "job__id", "runtime_instance_id"]
    list_filter = ["output_schema_version", "job__job_type"]
    raw_id_fields = ["job"]

    def get_readonly_fields(self, request: HttpRequest, obj: AiRuntimeResult | None = None) -> list[str]:
        return [f.name for f in AiRuntimeResult._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(AiInvocationLog)
class AiInvocationLogAdmin(admin.ModelAdmin):
    list_display = [
        "job",
        "attempt_no",
        "runtime_instance_id",
        "model_name",
        "http_status",
        "latency_ms",
        "total_tokens",
        "cost_cents",
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


from ai_jobs import admin_outputs  # noqa: E402, F401  (registers the outputs' pages)
