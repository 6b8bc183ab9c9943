"""Operators' view of model-asynch: model configs, tenants and keys, tasks by
state with their errors, daily statistics. Writes go through services."""

from __future__ import annotations

import contextlib
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.timezone import localtime

from asynch import services
from asynch.headers import HeaderSyntaxError, mask_api_key, parse_api_key
from asynch.models import AsynchModel, AsynchModelStat, AsynchTask, Tenant, TenantApiKey
from config import outbound
from config.admin_actions import permission_check
from config.errors import DomainError


class ModelConfigForm(forms.ModelForm):
    api_key = forms.CharField(
        label="API key headers",
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text=(
            "Key:Value pairs separated by commas. Leave blank to keep the current value, "
            "unless the base URL's scheme, host or port changes: the key never follows a config to a new host."
        ),
    )

    class Meta:
        model = AsynchModel
        fields = ["model_name", *services.CONFIG_FIELDS]

    def clean_api_key(self) -> str:
        value = self.cleaned_data.get("api_key", "")
        try:
            parse_api_key(value)
        except HeaderSyntaxError as error:
            raise forms.ValidationError(str(error)) from None
        return value

    def clean_base_url(self) -> str:
        value = self.cleaned_data.get("base_url", "")
        problem = outbound.problem(value, services.MODEL_HOSTS)
        if problem:
            raise forms.ValidationError(problem)
        return value

    def moves_host(self) -> bool:
        """A change form whose base URL names a new scheme, host or port."""
        base_url = self.cleaned_data.get("base_url")
        before = self.initial.get("base_url")
        return bool(self.instance.pk and base_url and before) and outbound.origin(base_url) != outbound.origin(before)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.moves_host() and not cleaned.get("api_key") and self._has_key():
            self.add_error(
                "api_key",
                "The scheme, host or port changed: enter the key headers again "
                "(the stored ones never follow a config to a new host).",
            )
        return cleaned

    def _has_key(self) -> bool:
        # A config without key headers has nothing that could follow it to a new host.
        try:
            return bool(services.model_api_key(self.instance))
        except Exception:  # a key that cannot be read is still a key
            return True


@admin.register(AsynchModel)
class AsynchModelAdmin(admin.ModelAdmin):
    form = ModelConfigForm
    list_display = [
        "model_name",
        "http_method",
        "base_url",
        "route",
        "enabled",
        "max_concurrency",
        "queue_limit",
        "timeout_seconds",
        "retry_times",
        "masked_api_key",
        "updated_at",
    ]
    list_filter = ["enabled", "http_method"]
    search_fields = ["model_name", "base_url", "remark"]
    readonly_fields = ["masked_api_key", "created_at", "updated_at"]

    @admin.display(description="API key headers")
    def masked_api_key(self, obj: AsynchModel) -> str:
        try:
            return mask_api_key(services.model_api_key(obj))
        except Exception:
            return "****"

    def get_readonly_fields(self, request: HttpRequest, obj: AsynchModel | None = None) -> list[str]:
        return [*self.readonly_fields, "model_name"] if obj else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: AsynchModel, form: forms.ModelForm, change: bool) -> None:
        fields = {name: form.cleaned_data[name] for name in services.CONFIG_FIELDS}
        api_key = form.cleaned_data.get("api_key") or ""
        try:
            if change:
                # A blank key keeps the stored one, except on a new host, where the form
                # let it through only because there is none: it stays empty.
                keep = None if not form.moves_host() else ""  # type: ignore[attr-defined]
                saved = services.model_update(model_name=obj.model_name, api_key=api_key or keep, **fields)
            else:
                saved = services.model_create(model_name=form.cleaned_data["model_name"], api_key=api_key, **fields)
        except DomainError as error:
            self.message_user(request, error.message, messages.ERROR)
            return
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: AsynchModel) -> None:
        services.model_delete(model_name=obj.model_name)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        # "Delete selected" goes through the service too: its failed tasks are told.
        for model_name in list(queryset.values_list("model_name", flat=True)):
            with contextlib.suppress(DomainError):  # deleted meanwhile
                services.model_delete(model_name=model_name)


class TenantApiKeyInline(admin.TabularInline):
    model = TenantApiKey
    extra = 0
    fields = ["prefix", "revoked", "created_at", "last_used_at"]
    readonly_fields = ["prefix", "revoked", "created_at", "last_used_at"]
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["name", "id", "is_admin", "is_active", "created_at"]
    list_filter = ["is_admin", "is_active"]
    search_fields = ["name", "id"]
    readonly_fields = ["id", "created_at"]
    inlines = [TenantApiKeyInline]
    actions = ["issue_key"]
    fields = ["id", "name", "is_admin", "is_active", "created_at"]

    def save_model(self, request: HttpRequest, obj: Tenant, form: forms.ModelForm, change: bool) -> None:
        data = form.cleaned_data
        if change:
            services.tenant_update(
                tenant_id=obj.pk, name=data["name"], is_admin=data["is_admin"], is_active=data["is_active"]
            )
        else:
            created = services.tenant_create(name=data["name"], is_admin=data["is_admin"])
            obj.pk = created.pk

    # Issuing makes a tenant key: the permission to add keys, wherever the action sits.
    has_issue_key_permission = permission_check("asynch.add_tenantapikey")

    @admin.action(description="Issue a new API key (shown once)", permissions=["issue_key"])
    def issue_key(self, request: HttpRequest, queryset: QuerySet[Tenant]) -> None:
        for tenant in queryset:
            issued = services.tenant_key_create(tenant=tenant)
            self.message_user(
                request, f"New X-Api-Key for {tenant.name}, shown only now: {issued.key}", messages.WARNING
            )


@admin.register(TenantApiKey)
class TenantApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "tenant", "revoked", "created_at", "last_used_at"]
    list_filter = ["revoked"]
    search_fields = ["prefix", "tenant__name"]
    readonly_fields = ["tenant", "prefix", "revoked", "created_at", "last_used_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # keys are issued from the tenant page or create_tenant_key

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[TenantApiKey]) -> None:
        count = services.tenant_keys_revoke(key_ids=list(queryset.values_list("id", flat=True)))
        self.message_user(request, f"{count} key(s) revoked.")


@admin.register(AsynchTask)
class AsynchTaskAdmin(admin.ModelAdmin):
    # Two short lines a cell instead of ten columns, so the list fits 1,400 px beside its filters
    # (templates/admin/asynch/asynchtask/change_list.html drops the app sidebar, as the job list's).
    list_display = ["task", "model_and_state", "work", "short_error", "times"]
    list_filter = ["state", "model_name", "tenant"]
    search_fields = ["id", "biz_name", "creator", "error_message"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    list_select_related = ["tenant"]
    exclude = ["forward_headers_encrypted"]
    actions = ["retry_now"]

    @admin.display(description="task · tenant", ordering="id")
    def task(self, obj: AsynchTask) -> str:
        return format_html('<span class="job-id">{}</span><div class="sub">{}</div>', obj.id, obj.tenant)

    @admin.display(description="model · state", ordering="model_name")
    def model_and_state(self, obj: AsynchTask) -> str:
        retried = f", retried {obj.retry_count} times" if obj.retry_count else ""
        return format_html(
            '<span class="task-model">{}</span><div class="sub">{}{}</div>',
            obj.model_name,
            obj.get_state_display(),
            retried,
        )

    @admin.display(description="business · creator")
    def work(self, obj: AsynchTask) -> str:
        return format_html('{}<div class="sub">{}</div>', obj.biz_name or "—", obj.creator or "—")

    @admin.display(description="error")
    def short_error(self, obj: AsynchTask) -> str:
        return format_html('<span class="task-error">{}</span>', (obj.error_message or "")[:80])

    @admin.display(description="created · finished", ordering="created_at")
    def times(self, obj: AsynchTask) -> str:
        finished = date_format(localtime(obj.finished_at), "DATETIME_FORMAT") if obj.finished_at else "—"
        return format_html(
            '{}<div class="sub">{}</div>', date_format(localtime(obj.created_at), "DATETIME_FORMAT"), finished
        )

    def get_readonly_fields(self, request: HttpRequest, obj: AsynchTask | None = None) -> list[str]:
        return [f.name for f in AsynchTask._meta.fields if f.name != "forward_headers_encrypted"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Retry selected failed tasks now (to the head of the queue)", permissions=["change"])
    def retry_now(self, request: HttpRequest, queryset: QuerySet[AsynchTask]) -> None:
        count = services.tasks_retry_now(task_ids=list(queryset.values_list("id", flat=True)))
        self.message_user(request, f"{count} failed task(s) queued again; others were not failed.")


@admin.register(AsynchModelStat)
class AsynchModelStatAdmin(admin.ModelAdmin):
    list_display = ["day", "tenant_id", "creator", "model_name", "request_count"]
    list_filter = ["day", "model_name"]
    search_fields = ["tenant_id", "creator", "model_name"]
    date_hierarchy = "day"
    ordering = ["-day", "model_name"]

    def get_readonly_fields(self, request: HttpRequest, obj: AsynchModelStat | None = None) -> list[str]:
        return [f.name for f in AsynchModelStat._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
