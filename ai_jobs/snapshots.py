"""Snapshots: what a runtime is given about the learner, built per target type.

A builder of the learning domain (``learning.snapshots.BUILDERS``) turns
``(user, target_id)`` into the ``data`` of a snapshot. The base every snapshot
carries is who the learner is and what the target is. It is pseudonymous: the
learner is their opaque public id, never their username or email.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from accounts.selectors import public_id_of
from ai_jobs.models import AiJobSnapshot
from learning.snapshots import BUILDERS

SNAPSHOT_SCHEMA_VERSION = "v1"


def build_data(*, user: AbstractBaseUser, target_type: str, target_id: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "learner": {"userId": public_id_of(user)},
        "target": {"type": target_type, "id": target_id},
    }
    builder = BUILDERS.get(target_type)
    if builder is not None:
        data.update(builder(user, target_id))
    return data


def snapshot_create(*, user: AbstractBaseUser, target_type: str, target_id: str) -> AiJobSnapshot:
    now = timezone.now()
    return AiJobSnapshot.objects.create(
        user=user,
        target_type=target_type,
        target_id=target_id,
        schema_version=SNAPSHOT_SCHEMA_VERSION,
        payload=build_data(user=user, target_type=target_type, target_id=target_id),
        created_at=now,
        expires_at=now + timedelta(seconds=settings.AI_JOB_SNAPSHOT_TTL_SECONDS),
    )
