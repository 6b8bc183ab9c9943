"""Logging in by username, whatever its spelling (``accounts.usernames``): ``" alice"``,
``"ALICE"`` and ``"\\uff21LICE"`` (a fullwidth A) all log in to ``alice``, in the user API
(``POST /auth/token``) and in Django admin alike."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest

from accounts.selectors import user_by_username
from accounts.usernames import username_normalize


class UsernameBackend(ModelBackend):
    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> AbstractBaseUser | None:
        user_model = get_user_model()
        if username is None:
            username = kwargs.get(user_model.USERNAME_FIELD)
        if not isinstance(username, str) or password is None:
            return None
        user = user_by_username(username_normalize(username))
        if user is None:
            # As Django's own backend does: hash the password anyway, so that a missing
            # user takes as long to refuse as a wrong password.
            user_model().set_password(password)
            return None
        if user.check_password(password) and self.user_can_authenticate(user):
            return user
        return None
