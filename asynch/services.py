"""Every write of model-asynch but the worker's (``asynch.worker``) and the cleaner's
(``asynch.cleaner``, whose run ``tasks_clean`` is also here): model configs, tenants
and keys, tasks, the batch pickup and statistics.

Task states change only through ``asynch.transitions``."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from asynch import crypto, events, queries, selectors, transitions
from asynch.cleaner import tasks_clean as tasks_clean  # the cleaner's run, with the other writes
from asynch.headers import parse_api_key
from asynch.kick import worker_kick
from asynch.models import AsynchModel, AsynchTask, TaskState, Tenant, TenantApiKey
from asynch.storage import get_storage
from config import outbound
from config.days import platform_day
from config.errors import DomainError, ErrorCode
from config.ids import new_id
from config.sql import execute

logger = logging.getLogger(__name__)


# --- model configs -------------------------------------------------------------------------

CONFIG_FIELDS = (
    "base_url",
    "route",
    "http_method",
    "enabled",
    "max_concurrency",
    "queue_limit",
    "timeout_seconds",
    "retry_times",
    "retry_queue_max_seconds",
    "auto_clean_seconds",
    "remark",
)


def _not_found(model_name: str) -> DomainError:
    return DomainError(ErrorCode.MODEL_NOT_FOUND, f"Model {model_name} is not configured")


def _refused_config(problems: dict[str, list[str]]) -> DomainError:
    return DomainError(
        ErrorCode.VALIDATION_ERROR, " ".join(p for found in problems.values() for p in found), fields=problems
    )


# The setting that lists the model hosts allowed past the address rules.
MODEL_HOSTS = "ASYNCH_ALLOWED_MODEL_HOSTS"


def base_url_check(base_url: str) -> None:
    """Refuse a ``baseUrl`` the worker would not call (``config.outbound``'s rules)."""
    problem = outbound.problem(base_url, MODEL_HOSTS)
    if problem:
        raise _refused_config({"baseUrl": [problem]})


KEY_STAYS = (
    "A new scheme, host or port needs its apiKey in the same request: "
    "the stored key never follows a config to a new host."
)


def model_create(*, model_name: str, api_key: str = "", **fields: Any) -> AsynchModel:
    """A new model config; ``api_key`` (the ``Key:Value`` headers) is stored encrypted."""
    parse_api_key(api_key)  # the caller validated it; this refuses anything else
    unknown = set(fields) - set(CONFIG_FIELDS)
    if unknown:
        raise TypeError(f"Unknown model config fields: {sorted(unknown)}")
    base_url_check(fields.get("base_url", ""))
    try:
        with transaction.atomic():
            return AsynchModel.objects.create(
                model_name=model_name, api_key_encrypted=crypto.encrypt(api_key), **fields
            )
    except IntegrityError:
        raise DomainError(
            ErrorCode.VALIDATION_ERROR,
            f"Model {model_name} already exists; use /model/updateModel",
            fields={"modelName": ["A model with this name already exists."]},
        ) from None


def model_update(*, model_name: str, api_key: str | None = None, **fields: Any) -> AsynchModel:
    """A partial update. A ``base_url`` on a new scheme, host or port is refused
    without ``api_key``: the key headers were given for the old host."""
    unknown = set(fields) - set(CONFIG_FIELDS)
    if unknown:
        raise TypeError(f"Unknown model config fields: {sorted(unknown)}")
    changes: dict[str, Any] = dict(fields)
    if api_key is not None:
        parse_api_key(api_key)
        changes["api_key_encrypted"] = crypto.encrypt(api_key)
    if "base_url" in fields:
        base_url_check(fields["base_url"])  # before the row is locked: it may wait for DNS
    now = changes["updated_at"] = timezone.now()
    with transaction.atomic():
        current = None
        moves_key_host = "base_url" in fields and api_key is None
        if moves_key_host or "retry_times" in fields:
            # Locked, so the host compared is the one the stored key goes to, and the
            # retries a failed task had are the ones it had until this change.
            current = AsynchModel.objects.select_for_update().filter(model_name=model_name).first()
            if current is None:
                raise _not_found(model_name)
        if (
            current is not None
            and moves_key_host
            and outbound.origin(fields["base_url"]) != outbound.origin(current.base_url)
        ):
            raise _refused_config({"apiKey": [KEY_STAYS]})
        if AsynchModel.objects.filter(model_name=model_name).update(**changes) != 1:
            raise _not_found(model_name)
        if current is not None and fields.get("retry_times", current.retry_times) < current.retry_times:
            events.tasks_out_of_retries(
                model_name=model_name,
                retry_times_before=current.retry_times,
                retry_times_now=fields["retry_times"],
                now=now,
            )
    updated = AsynchModel.objects.filter(model_name=model_name).first()
    if updated is None:  # deleted between the two statements: as missing as before
        raise _not_found(model_name)
    return updated


def model_delete(*, model_name: str) -> None:
    """The config goes; its failed tasks that had a retry left will never be queued
    again, so their tenants are told they failed (``task.failed``), in the same transaction."""
    with transaction.atomic():
        current = AsynchModel.objects.select_for_update().filter(model_name=model_name).only("retry_times").first()
        if current is None:
            raise _not_found(model_name)
        AsynchModel.objects.filter(model_name=model_name).delete()
        events.tasks_out_of_retries(
            model_name=model_name, retry_times_before=current.retry_times, retry_times_now=0, now=timezone.now()
        )


def model_api_key(model: AsynchModel) -> str:
    """The clear ``apiKey`` of a config: only for the worker's request headers."""
    return crypto.decrypt(model.api_key_encrypted)


# --- tenants and their keys ----------------------------------------------------------------


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def tenant_create(*, name: str, is_admin: bool = False) -> Tenant:
    return Tenant.objects.create(name=name, is_admin=is_admin)


@dataclass(frozen=True)
class IssuedKey:
    api_key: TenantApiKey
    key: str  # the clear key: shown once, never stored

    def __repr__(self) -> str:
        return f"IssuedKey({self.api_key.prefix}…)"


def tenant_key_create(*, tenant: Tenant) -> IssuedKey:
    """A new ``X-Api-Key`` for the tenant. Only its hash is kept."""
    key = "ak_" + secrets.token_urlsafe(32)
    api_key = TenantApiKey.objects.create(tenant=tenant, prefix=key[:10], key_hash=hash_api_key(key))
    return IssuedKey(api_key=api_key, key=key)


def tenant_key_ensure(*, tenant: Tenant, key: str) -> TenantApiKey:
    """A key chosen by the caller, for the tenant, if no tenant has it yet (``make run``'s
    demo tenant: a known key, like the demo's known passwords). Only its hash is kept."""
    api_key, _ = TenantApiKey.objects.get_or_create(
        key_hash=hash_api_key(key), defaults={"tenant": tenant, "prefix": key[:10]}
    )
    return api_key


def tenant_key_touch(*, key_id: str) -> None:
    """Record that a key is in use, at most once a minute (a conditional UPDATE)."""
    now = timezone.now()
    TenantApiKey.objects.filter(pk=key_id).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - dt.timedelta(minutes=1))
    ).update(last_used_at=now)


# Known keys, by hash, for ASYNCH_API_KEY_CACHE_SECONDS: a busy business service does
# not pay a database round trip per call. A revoked key or a deactivated tenant stops
# working within that time in every process (at once in the one that revoked it).
_known: dict[str, tuple[float, TenantApiKey]] = {}
_known_lock = threading.Lock()


def forget_keys() -> None:
    with _known_lock:
        _known.clear()


def tenant_key_find(*, key_hash: str) -> TenantApiKey | None:
    """The live key with this hash (with its tenant), from the cache or the database;
    a key found in the database is marked used."""
    ttl = settings.ASYNCH_API_KEY_CACHE_SECONDS
    now = time.monotonic()
    if ttl > 0:
        with _known_lock:
            hit = _known.get(key_hash)
        if hit is not None and hit[0] > now:
            return hit[1]
    found = selectors.tenant_for_key_hash(key_hash)
    if found is not None:
        tenant_key_touch(key_id=found.id)  # once per cache period, not per call
    if found is not None and ttl > 0:
        with _known_lock:
            if len(_known) > 10_000:
                _known.clear()
            _known[key_hash] = (now + ttl, found)
    return found


def tenant_update(*, tenant_id: str, name: str, is_admin: bool, is_active: bool) -> None:
    Tenant.objects.filter(pk=tenant_id).update(name=name, is_admin=is_admin, is_active=is_active)
    forget_keys()  # cached keys carry the tenant: this process sees the change at once


def tenant_ensure(*, name: str, is_admin: bool = False) -> Tenant:
    """The tenant of that name, created if missing; ``is_admin`` only ever grants."""
    tenant, _ = Tenant.objects.get_or_create(name=name, defaults={"is_admin": is_admin})
    if is_admin and not tenant.is_admin:
        Tenant.objects.filter(pk=tenant.pk).update(is_admin=True)
        tenant.is_admin = True
    return tenant


def tenant_keys_revoke(*, key_ids: Sequence[str]) -> int:
    revoked = TenantApiKey.objects.filter(id__in=key_ids, revoked=False).update(revoked=True)
    forget_keys()  # this process at once; the others within ASYNCH_API_KEY_CACHE_SECONDS
    return revoked


# --- tasks ------------------------------------------------------------------------------------


def task_create(
    *,
    tenant: Tenant,
    model_name: str,
    request_payload: dict[str, Any],
    biz_name: str = "",
    creator: str = "",
    forward_headers: dict[str, str] | None = None,
) -> AsynchTask:
    """Queue a task: one statement checks the model and its
    queue limit and inserts; only when it inserts nothing is the reason looked up."""
    headers = {k: v for k, v in (forward_headers or {}).items() if v}
    encrypted = crypto.encrypt(json.dumps(headers)) if headers and get_storage().captures_headers else None
    task = AsynchTask(
        id=new_id("task"),
        tenant=tenant,
        model_name=model_name,
        request_payload=request_payload,
        biz_name=biz_name,
        creator=creator,
        forward_headers_encrypted=encrypted,
    )
    task.enqueue_at = task.created_at = task.updated_at = timezone.now()
    if not transitions.enqueue(
        task_id=task.id,
        tenant_id=tenant.id,
        model_name=model_name,
        request_payload=request_payload,
        biz_name=biz_name,
        creator=creator,
        forward_headers_encrypted=encrypted,
        now=task.created_at,
    ):
        raise _refused(model_name)
    transaction.on_commit(worker_kick)
    return task


def _refused(model_name: str) -> DomainError:
    model = AsynchModel.objects.filter(model_name=model_name).only("enabled", "queue_limit").first()
    if model is None:
        return _not_found(model_name)
    if not model.enabled:
        return DomainError(ErrorCode.MODEL_DISABLED, f"Model {model_name} is disabled")
    return DomainError(
        ErrorCode.QUEUE_LIMIT_EXCEEDED, f"Model {model_name} has {model.queue_limit} queued tasks, its queueLimit"
    )


def tasks_retry_now(*, task_ids: Sequence[str]) -> int:
    """An operator re-queues failed tasks at the head, retries left or not."""
    with transaction.atomic():
        moved = transitions.requeue(task_ids=task_ids, to_head=True, jump_at=None, now=timezone.now())
        transaction.on_commit(worker_kick)
    return moved


@dataclass(frozen=True)
class BatchItem:
    task_id: str
    state: int
    oss_file: str | None


def tasks_pickup(*, tenant: Tenant, task_ids: Sequence[str]) -> list[BatchItem]:
    """getTaskBatch: the tenant's tasks among ``task_ids`` (others and unknown ids left
    out), succeeded ones moved 2 → 4 with ``expireAt = now + autoCleanSeconds``."""
    wanted = list(dict.fromkeys(task_ids))
    rows = {
        row["id"]: row
        for row in AsynchTask.objects.filter(tenant=tenant, id__in=wanted).values(
            "id", "state", "oss_file", "model_name"
        )
    }
    succeeded: dict[str, list[str]] = {}
    for row in rows.values():
        if row["state"] == TaskState.SUCCEEDED:
            succeeded.setdefault(row["model_name"], []).append(row["id"])
    if succeeded:
        now = timezone.now()
        retention = dict(
            AsynchModel.objects.filter(model_name__in=succeeded).values_list("model_name", "auto_clean_seconds")
        )
        for model_name, ids in succeeded.items():
            seconds = retention.get(model_name, settings.ASYNCH_DEFAULT_AUTO_CLEAN_SECONDS)
            expire_at = now + dt.timedelta(seconds=seconds)
            for task_id in transitions.mark_downloaded(task_ids=ids, expire_at=expire_at, now=now):
                rows[task_id]["state"] = TaskState.DOWNLOADED
    return [
        BatchItem(task_id=task_id, state=rows[task_id]["state"], oss_file=rows[task_id]["oss_file"])
        for task_id in wanted
        if task_id in rows
    ]


# --- statistics --------------------------------------------------------------------------------


def stat_count_call(
    *, tenant_id: str, creator: str, model_name: str, now: dt.datetime | None = None, calls: int = 1
) -> None:
    """Real model calls, counted on the platform's day in one atomic upsert (``calls``
    < 0 takes back calls counted for tasks that were then not called)."""
    now = now or timezone.now()
    execute(
        queries.COUNT_CALLS,
        {
            "day": platform_day(now),
            "tenant_id": tenant_id,
            "creator": creator,
            "model_name": model_name,
            "calls": calls,
            "now": now,
        },
    )
