"""Reads of users' credentials, owner-scoped: another user's credential is as
absent as a missing or deleted one."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from credentials.models import Credential


def credentials_of_user(*, user: AbstractBaseUser) -> QuerySet[Credential]:
    return Credential.objects.filter(user=user, deleted_at__isnull=True)


def credential_get_for_user(*, user: AbstractBaseUser, credential_id: str) -> Credential | None:
    """The user's live credential, or None when it is missing, deleted or another user's."""
    if not credential_id:
        return None
    return credentials_of_user(user=user).filter(id=credential_id).first()
