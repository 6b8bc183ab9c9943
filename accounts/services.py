"""Accounts: registering a learner, and every user's public id and username key."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction

from accounts.models import Account
from accounts.selectors import username_taken
from accounts.usernames import username_key, username_normalize
from config.errors import DomainError, ErrorCode


def user_on_saving(sender: type, instance: AbstractBaseUser, raw: bool = False, **_: Any) -> None:
    """``pre_save`` of a user: the username is stored normalized, however the user is
    saved (registration, the admin, ``createsuperuser``, the ORM)."""
    if not raw and isinstance(instance.username, str):  # type: ignore[attr-defined]
        instance.username = username_normalize(instance.username)  # type: ignore[attr-defined]


def account_on_user_saved(
    sender: type,
    instance: AbstractBaseUser,
    created: bool,
    raw: bool = False,
    update_fields: frozenset[str] | None = None,
    **_: Any,
) -> None:
    """``post_save`` of a user: a new user gets its public id and username key in the
    same transaction (a key another account holds fails the save: the name is taken);
    a renamed user's key follows its name."""
    if raw:
        return
    key = username_key(instance.username)  # type: ignore[attr-defined]
    if created:
        Account.objects.get_or_create(user_id=instance.pk, defaults={"username_key": key})
        return
    if update_fields is not None and "username" not in update_fields:
        return
    current = Account.objects.filter(user_id=instance.pk).values_list("username_key", flat=True).first()
    if current == key:
        return
    try:
        with transaction.atomic():
            _, made = Account.objects.get_or_create(user_id=instance.pk, defaults={"username_key": key})
            if not made:
                Account.objects.filter(user_id=instance.pk).update(username_key=key)
    except IntegrityError:
        if current is None:
            return  # an account that shared its key with an older one (accounts 0003) keeps none
        raise


def _taken() -> DomainError:
    return DomainError(
        ErrorCode.VALIDATION_ERROR,
        "Request validation failed: this username is taken",
        fields={"username": ["A user with that username already exists."]},
    )


def account_register(*, username: str, password: str, email: str = "") -> AbstractBaseUser:
    """A new learner (contract §2). Django's password validators decide what a
    password may be; a username is taken whatever its case or spelling
    (``accounts.usernames``), so ``ALICE`` cannot pass for ``alice``. The unique key
    decides between concurrent registrations; the check before only words the answer."""
    User = get_user_model()
    username = username_normalize(username)
    candidate = User(username=username, email=email)
    try:
        validate_password(password, user=candidate)
    except DjangoValidationError as error:
        raise DomainError(
            ErrorCode.VALIDATION_ERROR,
            "Request validation failed: " + " ".join(error.messages),
            fields={"password": list(error.messages)},
        ) from None
    if username_taken(username):
        raise _taken()
    try:
        with transaction.atomic():
            return User.objects.create_user(username=username, email=email, password=password)
    except IntegrityError:  # a concurrent registration of the same name won
        raise _taken() from None
