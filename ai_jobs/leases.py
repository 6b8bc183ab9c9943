"""What the holder of a job is given, read in one statement: the job's own columns
the checks need (the lease, consent), its snapshot as the stored JSON text, and the
columns of its credential that decrypt the user's key.

These are the hot reads of the runtime protocol (``GET .../snapshot``,
``POST .../credential``, ``claim`` with ``include``), so they are fixed statements
(``ai_jobs.queries.LEASED_JOB``) rather than ORM queries compiled per request, and
the snapshot's ``data`` goes to the wire as the database stores it: never decoded
and encoded again in Python.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.utils.dateparse import parse_datetime
from rest_framework.fields import DateTimeField

from ai_jobs import queries
from ai_jobs.transitions import consents_by_default
from config.sql import fetch

_DATETIME = DateTimeField()  # the wire's datetimes, exactly as the serializers render them


@dataclass(frozen=True)
class LeasedJob:
    """A leased job as its holder's reads see it."""

    id: str
    user_id: int
    target_type: str
    target_id: str
    api_key_mode: str
    model_provider: str
    model_name: str
    credential_id: str | None
    attempt_no: int
    status: str  # ``locked``: the attempt starts with this call
    user_public_id: str | None
    consents: bool
    timezone_name: str | None  # the user's (their settings'), read with the snapshot, for one built on the way
    snapshot: SnapshotRow | None
    credential_row: tuple[Any, ...] | None  # credentials.services.RESOLVE_COLUMNS, or None
    claimed: bool = False  # untouched since its claim: the claim sent again would answer it


@dataclass(frozen=True)
class SnapshotRow:
    id: str
    target_type: str
    target_id: str
    schema_version: str
    created_at: dt.datetime
    expires_at: dt.datetime
    payload_text: str


def _aware(value: Any) -> dt.datetime:
    """A datetime column as the ORM would load it (SQLite gives naive UTC text)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _leased(row: Sequence[Any]) -> LeasedJob:
    """A row of queries.LEASED_JOB (or CLAIMED_JOBS): the job's columns, the public id,
    consent, the snapshot's, the user's timezone, the credential's, whether it is untouched since its claim."""
    snap = None
    if row[12] is not None:
        snap = SnapshotRow(
            id=row[12],
            target_type=row[13],
            target_id=row[14],
            schema_version=row[15],
            created_at=_aware(row[16]),
            expires_at=_aware(row[17]),
            payload_text=row[18],
        )
    return LeasedJob(
        *row[:10],
        user_public_id=row[10],
        consents=bool(row[11]),
        timezone_name=row[19],
        snapshot=snap,
        credential_row=tuple(row[20:-1]) if row[20] is not None else None,
        claimed=bool(row[-1]),
    )


def _params(*, snapshot: bool, credential: bool) -> dict[str, Any]:
    return {"snapshot": snapshot, "credential": credential, "enabled_by_default": consents_by_default()}


def leased_job(
    *, job_id: str, instance_id: str, now: dt.datetime, snapshot: bool, credential: bool
) -> LeasedJob | None:
    """The job, if ``instance_id`` holds its live attempt (the lease not lapsed, the
    deadline not passed), with what was asked for."""
    params = {**_params(snapshot=snapshot, credential=credential), "job_id": job_id, "instance_id": instance_id}
    rows = fetch(queries.LEASED_JOB, {**params, "now": now, "now_ms": int(now.timestamp() * 1000)})
    return _leased(rows[0]) if rows else None


def claimed_jobs(
    *, job_ids: Sequence[str], instance_id: str, now: dt.datetime, snapshot: bool, credential: bool
) -> dict[str, LeasedJob]:
    """Jobs just claimed by ``instance_id``, with what was asked for, in one statement
    (SQLite, which has no arrays: one per job)."""
    if not job_ids:
        return {}
    if connection.vendor == "postgresql":
        rows = fetch(
            queries.CLAIMED_JOBS, {**_params(snapshot=snapshot, credential=credential), "job_ids": list(job_ids)}
        )
        return {row[0]: _leased(row) for row in rows}
    found = (
        leased_job(job_id=job_id, instance_id=instance_id, now=now, snapshot=snapshot, credential=credential)
        for job_id in job_ids
    )
    return {job.id: job for job in found if job is not None}


def snapshot_body(*, job_id: str, user_public_id: str | None, snapshot: SnapshotRow) -> str:
    """The body of ``GET .../snapshot``: the envelope, then the stored ``data`` text as it is."""
    head = {
        "jobId": job_id,
        "snapshotId": snapshot.id,
        "userId": user_public_id,
        "targetType": snapshot.target_type,
        "targetId": snapshot.target_id,
        "schemaVersion": snapshot.schema_version,
        "createdAt": _DATETIME.to_representation(snapshot.created_at),
        "expiresAt": _DATETIME.to_representation(snapshot.expires_at),
    }
    return json.dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1] + ',"data":' + snapshot.payload_text + "}"
