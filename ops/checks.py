"""``manage.py check --deploy``: settings that work on one machine and break quietly on
several (docs/operations/production.md), and a scrape left open."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.files.storage import FileSystemStorage, storages

# SigV4 presigned URLs are valid at most seven days.
S3_PRESIGN_MAX_SECONDS = 7 * 24 * 3600


def _postgres() -> bool:
    return "postgresql" in settings.DATABASES["default"]["ENGINE"]


@register(Tags.compatibility, deploy=True)
def check_shared_counters(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """PostgreSQL means a server that several processes and machines share; without
    Redis the throttles count in it (correct, one write a request) and each machine
    holds model-asynch's semaphores on its own."""
    if not _postgres():
        return []
    unshared = [
        name
        for name, value in (
            ("REDIS_URL", settings.REDIS_URL),
            ("ASYNCH_SEMAPHORE_REDIS_URL", settings.ASYNCH_SEMAPHORE_REDIS_URL),
        )
        if not value
    ]
    if not unshared:
        return []
    return [
        Warning(
            f"PostgreSQL is configured without {' and '.join(unshared)}.",
            hint="Throttles then count in PostgreSQL (a write per API request) and model-asynch's "
            "semaphores per machine, so maxConcurrency holds only within one machine. Set REDIS_URL.",
            id="ops.W001",
        )
    ]


@register(Tags.compatibility, deploy=True)
def check_result_storage(app_configs: Any = None, **kwargs: Any) -> list[Warning | Error]:
    backend = settings.ASYNCH_RESULT_STORAGE
    if backend not in ("django", "s3", "oss_service"):
        return [Error(f"ASYNCH_RESULT_STORAGE is {backend!r}.", hint="Use django, s3 or oss_service.", id="ops.E001")]
    if backend == "s3":
        found: list[Warning | Error] = []
        if not settings.ASYNCH_S3_BUCKET:
            found.append(Error("ASYNCH_RESULT_STORAGE is s3 but ASYNCH_S3_BUCKET is empty.", id="ops.E002"))
        if settings.ASYNCH_DOWNLOAD_URL_MAX_AGE > S3_PRESIGN_MAX_SECONDS:
            found.append(
                Warning(
                    f"ASYNCH_DOWNLOAD_URL_MAX_AGE is {settings.ASYNCH_DOWNLOAD_URL_MAX_AGE} s.",
                    hint=f"A presigned S3 URL is valid at most {S3_PRESIGN_MAX_SECONDS} s (seven days).",
                    id="ops.W003",
                )
            )
        return found
    if backend == "django" and settings.DEPLOYMENT_MACHINES > 1:
        storage = storages[settings.ASYNCH_STORAGE_ALIAS]
        if isinstance(storage, FileSystemStorage):
            return [
                Warning(
                    f"DEPLOYMENT_MACHINES is {settings.DEPLOYMENT_MACHINES} but model-asynch stores results "
                    f"on this machine's disk ({storage.location}).",
                    hint="A worker on one machine writes the file and a web process on another answers its "
                    "download with a 404. Set ASYNCH_RESULT_STORAGE=s3 (or oss_service), or point "
                    "ASYNCH_STORAGE_ALIAS at a storage every machine shares.",
                    id="ops.W002",
                )
            ]
    return []


@register(Tags.security, deploy=True)
def check_metrics_token(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """``/metrics`` names queue depths, runtimes and the platform's spend: in production
    only a scraper with the token reads it."""
    if settings.DEBUG or settings.METRICS_TOKEN:
        return []
    return [
        Error(
            "METRICS_TOKEN is not set: GET /metrics answers anyone.",
            hint="Set METRICS_TOKEN and give the scraper Authorization: Bearer <METRICS_TOKEN> (docs/operations/production.md).",
            id="ops.E003",
        )
    ]
