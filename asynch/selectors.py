"""Reads shared by views, services and the admin; task reads are tenant-scoped."""

from __future__ import annotations

import datetime as dt

from django.db.models import QuerySet

from asynch.models import AsynchModel, AsynchModelStat, AsynchTask, Tenant, TenantApiKey


def tenant_for_key_hash(key_hash: str) -> TenantApiKey | None:
    return (
        TenantApiKey.objects.select_related("tenant")
        .filter(key_hash=key_hash, revoked=False, tenant__is_active=True)
        .first()
    )


def model_get(*, model_name: str) -> AsynchModel | None:
    return AsynchModel.objects.filter(model_name=model_name).first()


def models_list() -> QuerySet[AsynchModel]:
    return AsynchModel.objects.all()


def task_get(*, tenant: Tenant, task_id: str) -> AsynchTask | None:
    """The tenant's task; another tenant's task is as missing as an unknown one."""
    return AsynchTask.objects.filter(id=task_id, tenant=tenant).defer("request_payload").first()


def stats_list(
    *, tenant: Tenant | None, day: dt.date | None = None, model_name: str | None = None
) -> QuerySet[AsynchModelStat]:
    """Daily call counts; ``tenant=None`` is every tenant's (staff and admin tenants)."""
    rows = AsynchModelStat.objects.all()
    if tenant is not None:
        rows = rows.filter(tenant_id=tenant.id)
    if day is not None:
        rows = rows.filter(day=day)
    if model_name:
        rows = rows.filter(model_name=model_name)
    return rows


def queue_order(*, model_name: str, limit: int = 100) -> list[str]:
    """Ids of the model's queued tasks in the order workers take them."""
    return list(
        AsynchTask.objects.filter(model_name=model_name, state=0)
        .order_by("priority", "enqueue_at", "id")
        .values_list("id", flat=True)[:limit]
    )
