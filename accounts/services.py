"""Accounts: registering a learner, and every user's public id."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction

from accounts.models import Account
from config.errors import DomainError, ErrorCode


def account_on_user_saved(sender: type, instance: AbstractBaseUser, created: bool, raw: bool = False, **_: Any) -> None:
    """``post_save`` of a user: a new user gets its public id in the same transaction."""
    if created and not raw:
        Account.objects.get_or_create(user_id=instance.pk)


def _taken(username: str) -> DomainError:
    return DomainError(
        ErrorCode.VALIDATION_ERROR,
        "Request validation failed: this username is taken",
        fields={"username": ["A user with that username already exists."]},
    )


def account_register(*, username: str, password: str, email: str = "") -> AbstractBaseUser:
    """A new learner (contract §2). Django's password validators decide what a
    password may be; a username is taken whatever its case, so ``Alice`` cannot
    pass for ``alice``."""
    User = get_user_model()
    candidate = User(username=username, email=email)
    try:
        validate_password(password, user=candidate)
    except DjangoValidationError as error:
        raise DomainError(
            ErrorCode.VALIDATION_ERROR,
            "Request validation failed: " + " ".join(error.messages),
            fields={"password": list(error.messages)},
        ) from None
    if User.objects.filter(username__iexact=username).exists():
        raise _taken(username)
    try:
        with transaction.atomic():
            return User.objects.create_user(username=username, email=email, password=password)
    except IntegrityError:  # a concurrent registration of the same name won
        raise _taken(username) from None
