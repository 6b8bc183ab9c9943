"""Where results go: one interface, three backends (``ASYNCH_RESULT_STORAGE``).

- ``django`` (default): Django's storage API (``STORAGES[ASYNCH_STORAGE_ALIAS]``);
  callers download at a signed, expiring URL served by this app
  (``GET /task/download/<token>``, ``django.core.signing``).
- ``s3``: the same, on an S3-compatible bucket (AWS S3, Aliyun OSS, MinIO) through
  django-storages' ``S3Storage`` (``ASYNCH_S3_*``), and callers download straight
  from the bucket at a presigned URL valid ``ASYNCH_DOWNLOAD_URL_MAX_AGE`` seconds:
  a worker on one machine stores what every web process on every machine hands out.
- ``oss_service``: the business's OSS file service: the result is posted as a
  multipart file to ``OSS_UPLOAD_URL`` (``oss/file/uploadFile``) with the
  ``Authorization`` and ``X-User-Info`` headers captured at createTask, and the URL
  it answers is what callers get.

``AsynchTask.oss_file`` keeps the backend's reference (storage name or OSS URL);
``url()`` turns it into what a caller downloads.

A stored answer is never served as a page: its name and media type say only whether it
is JSON (``.json``, ``application/json``) or not (``.bin``, ``application/octet-stream``),
whatever ``Content-Type`` the model claimed, and every backend hands it out as an
attachment.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Any, Protocol

import requests
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.core import signing
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages
from django.http import HttpRequest
from django.urls import reverse
from storages.backends.s3 import S3Storage

logger = logging.getLogger(__name__)

DOWNLOAD_SALT = "asynch.download"
FORWARDED_HEADERS = ("Authorization", "X-User-Info")
JSON_TYPE = "application/json"
BINARY_TYPE = "application/octet-stream"


class StorageError(Exception):
    """The result could not be stored; the task fails and the cleaner retries it."""


@dataclass(frozen=True)
class ResultFile:
    task_id: str
    tenant_id: str
    content: bytes
    content_type: str  # what the model said it answered: kept for the record, never trusted

    @functools.cached_property
    def media_type(self) -> str:
        try:
            json.loads(self.content)
        except (ValueError, RecursionError):
            return BINARY_TYPE
        return JSON_TYPE

    @property
    def filename(self) -> str:
        return f"{self.task_id}{'.json' if self.media_type == JSON_TYPE else '.bin'}"


def media_type_of(name: str) -> str:
    """The media type a stored result is served with, from its name (``ResultFile.filename``)."""
    return JSON_TYPE if name.endswith(".json") else BINARY_TYPE


class ResultStorage(Protocol):
    # Whether createTask must capture (and encrypt) the caller's forwarded headers.
    captures_headers: bool

    def save(self, result: ResultFile, *, forward_headers: dict[str, str]) -> str: ...

    def url(self, ref: str, *, request: HttpRequest | None = None) -> str: ...

    def delete(self, ref: str) -> None: ...


class DjangoResultStorage:
    captures_headers = False
    # What the storage raises when it cannot store: the task fails and is retried.
    save_errors: tuple[type[Exception], ...] = (OSError,)

    @property
    def storage(self) -> Storage:
        return storages[settings.ASYNCH_STORAGE_ALIAS]

    def save(self, result: ResultFile, *, forward_headers: dict[str, str]) -> str:
        name = f"asynch/{result.tenant_id}/{result.filename}"
        try:
            # A name taken by an earlier attempt gets a suffix from the storage; that
            # attempt's file went with it (a lost attempt deletes its own). An object
            # store keeps the media type with the object (S3's ContentType).
            content = ContentFile(result.content)
            content.content_type = result.media_type  # type: ignore[attr-defined]
            return self.storage.save(name, content)
        except self.save_errors as error:
            raise StorageError(f"Could not store the result: {type(error).__name__}: {error}") from error

    def url(self, ref: str, *, request: HttpRequest | None = None) -> str:
        token = signing.dumps(ref, salt=DOWNLOAD_SALT)
        path = reverse("asynch-download", args=[token])
        if settings.ASYNCH_PUBLIC_BASE_URL:
            return settings.ASYNCH_PUBLIC_BASE_URL.rstrip("/") + path
        return request.build_absolute_uri(path) if request is not None else path

    def delete(self, ref: str) -> None:
        self.storage.delete(ref)


def download_name(token: str) -> str | None:
    """The storage name a download token signs, or None when it is forged or expired."""
    try:
        name = signing.loads(token, salt=DOWNLOAD_SALT, max_age=settings.ASYNCH_DOWNLOAD_URL_MAX_AGE)
    except signing.BadSignature:
        return None
    return name if isinstance(name, str) and name.startswith("asynch/") else None


class S3ResultStorage(DjangoResultStorage):
    """Django's storage API on an S3-compatible bucket; ``ossFile`` is a presigned URL."""

    save_errors = (OSError, BotoCoreError, ClientError)

    @property
    def storage(self) -> Storage:
        return _s3_storage(
            bucket_name=settings.ASYNCH_S3_BUCKET,
            endpoint_url=settings.ASYNCH_S3_ENDPOINT_URL or None,
            region_name=settings.ASYNCH_S3_REGION or None,
            access_key=settings.ASYNCH_S3_ACCESS_KEY_ID or None,
            secret_key=settings.ASYNCH_S3_SECRET_ACCESS_KEY or None,
            addressing_style=settings.ASYNCH_S3_ADDRESSING_STYLE or None,
            querystring_expire=settings.ASYNCH_DOWNLOAD_URL_MAX_AGE,
        )

    def url(self, ref: str, *, request: HttpRequest | None = None) -> str:
        return self.storage.url(ref)


@functools.cache
def _s3_storage(**options: Any) -> S3Storage:
    # One client per process and configuration (boto3 clients are thread-safe).
    return S3Storage(
        **options,
        querystring_auth=True,
        file_overwrite=False,  # an earlier attempt's name gets a suffix, as on disk
        default_acl=None,  # private: the presigned URL is the permission
        signature_version="s3v4",
        # The bucket serves the presigned URL as a download, never as a page.
        object_parameters={"ContentDisposition": "attachment"},
    )


class OssServiceStorage:
    captures_headers = True

    def save(self, result: ResultFile, *, forward_headers: dict[str, str]) -> str:
        if not settings.OSS_UPLOAD_URL:
            raise StorageError("OSS_UPLOAD_URL is not set")
        try:
            response = requests.post(
                settings.OSS_UPLOAD_URL,
                files={"file": (result.filename, result.content, result.media_type)},
                headers={k: v for k, v in forward_headers.items() if k in FORWARDED_HEADERS},
                timeout=settings.ASYNCH_OSS_TIMEOUT_SECONDS,
                allow_redirects=False,  # the caller's Authorization goes to OSS_UPLOAD_URL only
            )
        except requests.RequestException as error:
            raise StorageError(f"OSS upload failed: {type(error).__name__}") from error
        if response.status_code >= 300:
            redirect = ", a redirect (never followed)" if response.status_code < 400 else ""
            raise StorageError(f"OSS upload answered HTTP {response.status_code}{redirect}")
        try:
            body = response.json()
        except (ValueError, RecursionError):  # not JSON, or "[[[[..." past the stack: a URL in text, or none
            body = response.text.strip()
        url = _url_in(body)
        if not url:
            raise StorageError("OSS upload answered without a file URL")
        return url

    def url(self, ref: str, *, request: HttpRequest | None = None) -> str:
        return ref

    def delete(self, ref: str) -> None:
        # The OSS file service has no delete; the business moves
        # its results away itself.
        return None


_URL_KEYS = ("url", "fileUrl", "ossFile", "ossUrl", "path", "filePath", "key")


def _url_in(body: Any) -> str | None:
    """The file URL in an OSS answer: a plain string, or the first of the usual keys,
    at the top level or under ``data``."""
    if isinstance(body, str):
        return body or None
    if isinstance(body, dict):
        for key in _URL_KEYS:
            if isinstance(body.get(key), str) and body[key]:
                return body[key]
        if "data" in body:
            return _url_in(body["data"])
    return None


BACKENDS: dict[str, type[ResultStorage]] = {
    "django": DjangoResultStorage,
    "s3": S3ResultStorage,
    "oss_service": OssServiceStorage,
}


def get_storage() -> ResultStorage:
    backend = BACKENDS.get(settings.ASYNCH_RESULT_STORAGE)
    if backend is None:
        raise ValueError(
            f"ASYNCH_RESULT_STORAGE must be one of {sorted(BACKENDS)}, not {settings.ASYNCH_RESULT_STORAGE!r}"
        )
    return backend()


def delete_quietly(refs: list[str]) -> int:
    """Delete stored results after their tasks went; a file that will not go is logged."""
    storage = get_storage()
    deleted = 0
    for ref in refs:
        try:
            storage.delete(ref)
            deleted += 1
        except Exception:
            logger.warning("asynch: could not delete the stored result %s", ref, exc_info=True)
    return deleted
