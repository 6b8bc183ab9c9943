"""Writes of ops' own: what the admin's login records keep of a user goes with them."""

from __future__ import annotations

from typing import Any

from axes.models import AccessAttempt, AccessFailureLog, AccessLog

from ops.admin_login import normalized_username


def admin_logins_forget(*, username: str) -> int:
    """Delete every admin login record naming ``username`` (as typed at login, and as
    the lockout counts it); the number of rows deleted."""
    names = {username, normalized_username(username)}
    models = (AccessAttempt, AccessLog, AccessFailureLog)
    return sum(model.objects.filter(username__in=names).delete()[0] for model in models)


def user_deleted(sender: type, instance: Any, **kwargs: Any) -> None:
    """``post_delete`` of the user model. The records name users by username, not by a
    foreign key that would cascade: a user deleted in the ORM or the admin goes here too."""
    admin_logins_forget(username=instance.get_username())
