"""Reads shared by views, services and the admin; task reads are tenant-scoped."""

from __future__ import annotations

import datetime as dt

from django.db.models import Count, QuerySet

from asynch.models import AsynchModel, AsynchModelStat, AsynchTask, TaskState, Tenant, TenantApiKey
from asynch.semaphore import get_semaphore, semaphore_key


def tenant_for_key_hash(key_hash: str) -> TenantApiKey | None:
    return (
        TenantApiKey.objects.select_related("tenant")
        .filter(key_hash=key_hash, revoked=False, tenant__is_active=True)
        .first()
    )


def model_get(*, model_name: str) -> AsynchModel | None:
    return AsynchModel.objects.filter(model_name=model_name).first()


def models_list(*, enabled_only: bool = False) -> QuerySet[AsynchModel]:
    models = AsynchModel.objects.all()
    return models.filter(enabled=True) if enabled_only else models


def task_get(*, tenant: Tenant, task_id: str) -> AsynchTask | None:
    """The tenant's task; another tenant's task is as missing as an unknown one."""
    return AsynchTask.objects.filter(id=task_id, tenant=tenant).defer("request_payload").first()


def task_succeeded_with(*, task_id: str, attempt_no: int, oss_file: str) -> bool:
    """Did this attempt's success commit with this file? (A retried UPDATE after a
    lost connection finds the row already moved.)"""
    rows = AsynchTask.objects.filter(id=task_id, attempt_no=attempt_no, oss_file=oss_file)
    return rows.filter(state__in=(TaskState.SUCCEEDED, TaskState.DOWNLOADED)).exists()


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


# --- what operators watch: /metrics and the dashboard read these (through ops.selectors) ---------

OPEN_STATES = (0, 1, 2, 3)


def tasks_by_state_and_model() -> dict[tuple[int, str], int]:
    """(state, model name) → tasks, for states 0-3: one query per state, each served
    by that state's partial index, so downloaded history (state 4) is never read."""
    counts: dict[tuple[int, str], int] = {}
    for state in OPEN_STATES:
        rows = AsynchTask.objects.filter(state=state).values("model_name").annotate(n=Count("*")).order_by()
        for row in rows:
            counts[(state, row["model_name"])] = row["n"]
    return counts


def running_pairs() -> list[tuple[str, str]]:
    """(tenant, model) of running tasks: the only semaphores that can have holders."""
    return list(AsynchTask.objects.filter(state=1).values_list("tenant_id", "model_name").distinct().order_by())


def semaphore_in_use() -> dict[str, int]:
    """Slots held now per model, all tenants, read from the semaphore itself."""
    semaphore = get_semaphore()
    held: dict[str, int] = {}
    for tenant_id, model_name in running_pairs():
        held[model_name] = held.get(model_name, 0) + semaphore.holders(semaphore_key(tenant_id, model_name))
    return held
