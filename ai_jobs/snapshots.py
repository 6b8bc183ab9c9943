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
from ai_jobs import queries
from ai_jobs.models import AiJobSnapshot
from config.ids import new_id
from config.sql import execute
from learning.snapshots import document

SNAPSHOT_SCHEMA_VERSION = "v1"
# Every concrete field but payload, which stays deferred.
_ATTNAMES = ("id", "user_id", "target_type", "target_id", "schema_version", "created_at", "expires_at")


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
    values = {
        "id": new_id("snap"),
        "user_id": user.pk,
        "target_type": target_type,
        "target_id": str(target_id),
        "schema_version": SNAPSHOT_SCHEMA_VERSION,
        "created_at": now,
        "expires_at": now + timedelta(seconds=settings.AI_JOB_SNAPSHOT_TTL_SECONDS),
    }
    execute(queries.INSERT_SNAPSHOT, {**values, "payload": text})
    snapshot = AiJobSnapshot.from_db(connection.alias, _ATTNAMES, [values[name] for name in _ATTNAMES])
    snapshot.payload_text = text
    return snapshot
