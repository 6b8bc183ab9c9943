"""What the holder of a job is given, read in one statement: the job's own columns
the checks need (the lease, consent), its snapshot as the stored JSON text, and the
columns of its credential that decrypt the user's key.

These are the hot reads of the runtime protocol (``GET .../snapshot``,
``POST .../credential``, ``claim`` with ``include``), so they are fixed SQL rather
than ORM queries compiled per request, and the snapshot's ``data`` goes to the
wire as the database stores it: never decoded and encoded again in Python.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import connection
from django.utils.dateparse import parse_datetime
from rest_framework.fields import DateTimeField

from ai_jobs.models import AiJobSnapshot
from ai_jobs.transitions import ACTIVE_SQL, PUBLIC_ID_SQL, TABLE, consent_sql
from config.sql import fetch, placeholders
from credentials.models import Credential
from credentials.services import RESOLVE_COLUMNS
from quotas.models import UserAiSettings

SNAPSHOT_TABLE = AiJobSnapshot._meta.db_table
CREDENTIAL_TABLE = Credential._meta.db_table
_JOB_COLUMNS = (
    "id",
    "user_id",
    "target_type",
    "target_id",
    "api_key_mode",
    "model_provider",
    "model_name",
    "credential_id",
    "attempt_no",
    "status",
)
_SNAPSHOT_COLUMNS = ("id", "target_type", "target_id", "schema_version", "created_at", "expires_at")
_DATETIME = DateTimeField()  # the wire's datetimes, exactly as the serializers render them
# The user's timezone, read with the snapshot: one built on the way needs it.
TIMEZONE_SQL = f"(SELECT s.timezone FROM {UserAiSettings._meta.db_table} s WHERE s.user_id = {TABLE}.user_id)"


@dataclass(frozen=True)
class HeldJob:
    """A job as its holder's reads see it; ``snapshot_text`` is the stored payload."""

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


@dataclass(frozen=True)
class SnapshotRow:
    id: str
    target_type: str
    target_id: str
    schema_version: str
    created_at: dt.datetime
    expires_at: dt.datetime
    payload_text: str


@cache
def _sql(vendor: str, consent: str, *, snapshot: bool, credential: bool, many: int) -> str:
    """The statement: the job by primary key (``many``: by ``id IN``), its snapshot
    and credential rows by primary key. One statement per shape, built once."""
    columns = [f"{TABLE}.{name}" for name in _JOB_COLUMNS] + [PUBLIC_ID_SQL, consent]
    joins = []
    if snapshot:
        # jsonb is sent as its text form, serialized by PostgreSQL; SQLite stores text.
        payload = "snap.payload::text" if vendor == "postgresql" else "snap.payload"
        columns += [f"snap.{name}" for name in _SNAPSHOT_COLUMNS] + [payload, TIMEZONE_SQL]
        joins.append(f"LEFT JOIN {SNAPSHOT_TABLE} snap ON snap.id = {TABLE}.snapshot_id")
    if credential:
        columns += [f"cred.{name}" for name in RESOLVE_COLUMNS]
        joins.append(
            f"LEFT JOIN {CREDENTIAL_TABLE} cred ON cred.id = {TABLE}.credential_id "
            f"AND cred.user_id = {TABLE}.user_id AND cred.deleted_at IS NULL"
        )
    where = f"{TABLE}.id = %s" if many == 0 else f"{TABLE}.id IN ({placeholders(range(many))})"
    return f"SELECT {', '.join(columns)} FROM {TABLE} {' '.join(joins)} WHERE {where}"


def _aware(value: Any) -> dt.datetime:
    """A datetime column as the ORM would load it (SQLite gives naive UTC text)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _held(row: Sequence[Any], *, snapshot: bool, credential: bool) -> HeldJob:
    n = len(_JOB_COLUMNS)
    rest = list(row[n + 2 :])
    snap, timezone_name = None, None
    if snapshot:
        width = len(_SNAPSHOT_COLUMNS) + 2  # and the payload's text, and the user's timezone
        values, rest = rest[:width], rest[width:]
        timezone_name = values[7]
        if values[0] is not None:
            snap = SnapshotRow(
                id=values[0],
                target_type=values[1],
                target_id=values[2],
                schema_version=values[3],
                created_at=_aware(values[4]),
                expires_at=_aware(values[5]),
                payload_text=values[6],
            )
    return HeldJob(
        *row[:n],
        user_public_id=row[n],
        consents=bool(row[n + 1]),
        timezone_name=timezone_name,
        snapshot=snap,
        credential_row=tuple(rest) if credential and rest and rest[0] is not None else None,
    )


def held_job(*, job_id: str, instance_id: str, now: dt.datetime, snapshot: bool, credential: bool) -> HeldJob | None:
    """The job, if ``instance_id`` holds its live attempt (the lease not lapsed, the
    deadline not passed), with what was asked for."""
    sql = _sql(connection.vendor, consent_sql(), snapshot=snapshot, credential=credential, many=0)
    sql += (
        f" AND {TABLE}.{ACTIVE_SQL} AND {TABLE}.locked_by = %s AND {TABLE}.lock_until >= %s "
        f"AND ({TABLE}.deadline_ms IS NULL OR {TABLE}.deadline_ms >= %s)"
    )
    rows = fetch(sql, [job_id, instance_id, now, int(now.timestamp() * 1000)])
    return _held(rows[0], snapshot=snapshot, credential=credential) if rows else None


def claimed_jobs(*, job_ids: Sequence[str], snapshot: bool, credential: bool) -> dict[str, HeldJob]:
    """Jobs just claimed by the caller, with what was asked for, in one statement."""
    if not job_ids:
        return {}
    sql = _sql(connection.vendor, consent_sql(), snapshot=snapshot, credential=credential, many=len(job_ids))
    return {row[0]: _held(row, snapshot=snapshot, credential=credential) for row in fetch(sql, list(job_ids))}


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
