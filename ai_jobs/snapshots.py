"""Snapshots: what a runtime is given about the learner, built per target type.

A builder turns ``(user, target_id)`` into the ``data`` of a snapshot; the
registry below picks one by target type. The base every snapshot carries is who
the learner is and what the target is; the learning domain adds its builders.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from ai_jobs.models import AiJobSnapshot

SNAPSHOT_SCHEMA_VERSION = "v1"

Builder = Callable[[AbstractBaseUser, str], dict[str, Any]]
_BUILDERS: dict[str, Builder] = {}


def register(target_type: str) -> Callable[[Builder], Builder]:
    def decorate(builder: Builder) -> Builder:
        _BUILDERS[target_type] = builder
        return builder

    return decorate


def build_data(*, user: AbstractBaseUser, target_type: str, target_id: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "learner": {"userId": str(user.pk), "username": user.get_username()},
        "target": {"type": target_type, "id": target_id},
    }
    builder = _BUILDERS.get(target_type)
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
