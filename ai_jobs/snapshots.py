"""Snapshots: what a runtime is given about the learner, built per target type.

The learning domain (``learning.snapshots.document``) has the database assemble
the ``data`` of a snapshot for ``(user, target_type, target_id)`` as JSON text. The base every snapshot
carries is who the learner is and what the target is. It is pseudonymous: the
learner is their opaque public id, never their username or email.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.utils import timezone

from accounts.selectors import public_id_of
from ai_jobs.models import AiJobSnapshot
from config.ids import new_id
from config.sql import execute, placeholders
from learning.snapshots import document

SNAPSHOT_SCHEMA_VERSION = "v1"
TABLE = AiJobSnapshot._meta.db_table
_COLUMNS = ("id", "user_id", "target_type", "target_id", "schema_version", "created_at", "expires_at")
_ATTNAMES = _COLUMNS  # every concrete field but payload, which stays deferred


def build_data(*, user: AbstractBaseUser, target_type: str, target_id: str) -> dict[str, Any]:
    return json.loads(build_text(user=user, target_type=target_type, target_id=target_id))


def build_text(*, user: AbstractBaseUser, target_type: str, target_id: str, timezone_name: str | None = None) -> str:
    """The ``data`` of a snapshot as JSON text, assembled by the database."""
    learner = {"userId": public_id_of(user)}
    return document(user, target_type, target_id, learner=learner, timezone_name=timezone_name)


def snapshot_create(
    *, user: AbstractBaseUser, target_type: str, target_id: str, timezone_name: str | None = None
) -> AiJobSnapshot:
    """Store a new snapshot of the learner's data for the target. The database's text
    is inserted as it is, and the row carries it (``payload_text``) so that a caller
    sending it on (the claim's fast path, a rebuild on GET) never encodes it again;
    ``payload`` is read back only if someone asks for it. ``timezone_name``: the
    learner's, when the caller has just read their settings (else read here)."""
    now = timezone.now()
    text = build_text(user=user, target_type=target_type, target_id=target_id, timezone_name=timezone_name)
    values = [
        new_id("snap"),
        user.pk,
        target_type,
        str(target_id),
        SNAPSHOT_SCHEMA_VERSION,
        now,
        now + timedelta(seconds=settings.AI_JOB_SNAPSHOT_TTL_SECONDS),
    ]
    payload = "CAST(%s AS jsonb)" if connection.vendor == "postgresql" else "%s"
    execute(
        f"INSERT INTO {TABLE} ({', '.join(_COLUMNS)}, payload) VALUES ({placeholders(values)}, {payload})",
        [*values, text],
    )
    snapshot = AiJobSnapshot.from_db(connection.alias, _ATTNAMES, values)
    snapshot.payload_text = text
    return snapshot
