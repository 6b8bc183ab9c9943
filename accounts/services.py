"""Accounts: registering a learner, every user's public id and username key, and the
user API's sessions (refresh rotation, logout, a password change)."""

from __future__ import annotations

import time
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from rest_framework_simplejwt.exceptions import TokenError
from rest_framework_simplejwt.settings import api_settings
from rest_framework_simplejwt.token_blacklist.models import BlacklistedToken, OutstandingToken
from rest_framework_simplejwt.tokens import UntypedToken
from rest_framework_simplejwt.utils import datetime_from_epoch

from accounts.models import Account
from accounts.selectors import user_with_account, username_taken
from accounts.tokens import FAMILY_CLAIM, RefreshToken, revoked_families, token_is_current, token_pair
from accounts.usernames import username_key, username_normalize
from config.errors import DomainError, ErrorCode


class UsernameTaken(DjangoValidationError, IntegrityError):
    """A new user whose name is one with an existing account's: what the unique key
    would say, said before the user's row is written. A validation error (so
    ``createsuperuser`` answers it as one) and an integrity error (what the key says)."""


def user_on_saving(
    sender: type,
    instance: AbstractBaseUser,
    raw: bool = False,
    update_fields: frozenset[str] | None = None,
    **_: Any,
) -> None:
    """``pre_save`` of a user: the username is stored normalized, however the user is
    saved (registration, the admin, ``createsuperuser``, the ORM); a new user may not
    take a name that is one with an existing account's. The key is checked here, before
    the user's row exists: outside a transaction a row written first would stay. A user
    made active again starts a new token generation (``accounts.tokens``)."""
    if raw:
        return
    if isinstance(instance.username, str):  # type: ignore[attr-defined]
        instance.username = username_normalize(instance.username)  # type: ignore[attr-defined]
        if instance._state.adding and username_taken(instance.username):  # type: ignore[attr-defined]
            raise UsernameTaken("A user with that username already exists.", code="unique")
    if not instance._state.adding and instance.is_active and (update_fields is None or "is_active" in update_fields):
        # Made active again: the tokens issued before the deactivation stay dead.
        Account.objects.filter(user_id=instance.pk, user__is_active=False).update(
            token_generation=F("token_generation") + 1
        )


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
        try:  # get_or_create makes the row in a savepoint of its own
            Account.objects.get_or_create(user_id=instance.pk, defaults={"username_key": key})
        except IntegrityError:
            # A concurrent save of the same name won between the check and here. Outside
            # a transaction this user's row is written already: it goes again.
            if not transaction.get_connection().in_atomic_block:
                type(instance)._default_manager.filter(pk=instance.pk).delete()
            raise UsernameTaken("A user with that username already exists.", code="unique") from None
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


def tokens_on_user_deleting(sender: type, instance: AbstractBaseUser, **_: Any) -> None:
    """``pre_delete`` of a user: their refresh tokens' rows go with them (simplejwt's
    foreign key would only empty their ``user``)."""
    OutstandingToken.objects.filter(user_id=instance.pk).delete()


def _taken() -> DomainError:
    return DomainError(
        ErrorCode.VALIDATION_ERROR,
        "Request validation failed: this username is taken",
        fields={"username": ["A user with that username already exists."]},
    )


def account_register(*, username: str, password: str, email: str = "") -> AbstractBaseUser:
    """A new learner. Django's password validators decide what a
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


def _unauthorized(message: str) -> DomainError:
    return DomainError(ErrorCode.UNAUTHORIZED, message)


# How many ended families an account lists; past it, every token of the user ends
# (a new token generation), which bounds the row whatever a thief replays.
MAX_REVOKED_FAMILIES = 50


def family_revoke(*, user_id: int, family: str) -> None:
    """End a refresh-token family: every token that names it is refused from now on
    (``accounts.tokens``). Kept as long as a token of it could be valid: a refresh
    token issued now lives ``REFRESH_TOKEN_LIFETIME``. A conditional update on the
    list as read, again if another revocation changed it meanwhile."""
    now = time.time()
    until = now + api_settings.REFRESH_TOKEN_LIFETIME.total_seconds()
    for _ in range(10):
        current = Account.objects.filter(user_id=user_id).values_list("revoked_families", flat=True).first()
        if current is None:
            return
        families = revoked_families(current, now)
        families[family] = until
        if len(families) > MAX_REVOKED_FAMILIES:
            changes: dict[str, Any] = {"revoked_families": "", "token_generation": F("token_generation") + 1}
        else:
            changes = {"revoked_families": " ".join(f"{name}:{int(end) + 1}" for name, end in families.items())}
        if Account.objects.filter(user_id=user_id, revoked_families=current).update(**changes) == 1:
            return
    Account.objects.filter(user_id=user_id).update(token_generation=F("token_generation") + 1)


def _replayed(raw: str) -> None:
    """A refresh token refused by simplejwt: if it is ours, unexpired and used up
    already (rotated, or logged out), it is a replay, and its family ends."""
    try:
        token = UntypedToken(raw)  # signature and expiry, not the blacklist
    except TokenError:
        return
    family, jti = token.get(FAMILY_CLAIM), token.get(api_settings.JTI_CLAIM)
    if token.get(api_settings.TOKEN_TYPE_CLAIM) != "refresh" or not isinstance(family, str) or not jti:
        return
    if BlacklistedToken.objects.filter(token__jti=jti).exists():
        user = user_with_account(str(token.get(api_settings.USER_ID_CLAIM, "")))
        if user is not None:
            family_revoke(user_id=user.pk, family=family)


def _live_refresh(raw: str) -> tuple[RefreshToken, AbstractBaseUser]:
    """The refresh token ``raw`` and its user, if it is still good: signed by us,
    unexpired, never used up, and issued to a user who still exists, is active and
    has the password it was issued under. One used up already ends its family."""
    try:
        token = RefreshToken(raw)  # signature, expiry, type and the blacklist
    except TokenError as error:
        _replayed(raw)
        raise _unauthorized(f"The refresh token is not valid: {error}") from None
    user = user_with_account(str(token.get(api_settings.USER_ID_CLAIM, "")))
    if user is None or not user.is_active or not token_is_current(token, user):
        raise _unauthorized("The refresh token's account no longer accepts it: log in again")
    return token, user


def _use_up(token: RefreshToken, user: AbstractBaseUser) -> None:
    """Blacklist ``token``. Two requests with one token both get here; the blacklist's
    unique row lets exactly one of them through (the other is a replay: its family
    ends). The row keeps the token's id and expiry, never the token."""
    outstanding, _ = OutstandingToken.objects.get_or_create(
        jti=token[api_settings.JTI_CLAIM],
        defaults={
            "user_id": user.pk,
            "token": "",
            "created_at": datetime_from_epoch(token["iat"]),
            "expires_at": datetime_from_epoch(token["exp"]),
        },
    )
    try:
        with transaction.atomic():
            BlacklistedToken.objects.create(token=outstanding)
    except IntegrityError:
        raise _unauthorized("The refresh token is not valid: Token is blacklisted") from None


def _used_up_or_replayed(token: RefreshToken, user: AbstractBaseUser) -> None:
    try:
        with transaction.atomic():
            _use_up(token, user)
    except DomainError:
        # Lost the race to another use of the same token: a replay (outside the
        # transaction that failed, so the revocation stays).
        family = token.get(FAMILY_CLAIM)
        if isinstance(family, str):
            family_revoke(user_id=user.pk, family=family)
        raise


def session_refresh(*, refresh: str) -> dict[str, str]:
    """``POST /auth/token/refresh``: a new access token and a new refresh token of the
    same family; the one given is used up."""
    token, user = _live_refresh(refresh)
    _used_up_or_replayed(token, user)
    family = token.get(FAMILY_CLAIM)
    return token_pair(user, family if isinstance(family, str) else None)


def session_logout(*, refresh: str) -> None:
    """``POST /auth/logout``: the refresh token is used up, for good."""
    token, user = _live_refresh(refresh)
    _used_up_or_replayed(token, user)


def account_password_change(*, user: AbstractBaseUser, old_password: str, new_password: str) -> None:
    """``POST /auth/password``: a new password, Django's validators deciding what it
    may be. Every token issued before names the old one (``accounts.tokens``) and is
    refused from now on."""
    if not user.check_password(old_password):
        raise DomainError(
            ErrorCode.VALIDATION_ERROR,
            "Request validation failed: the old password is not right",
            fields={"oldPassword": ["This is not the account's password."]},
        )
    try:
        validate_password(new_password, user=user)
    except DjangoValidationError as error:
        raise DomainError(
            ErrorCode.VALIDATION_ERROR,
            "Request validation failed: " + " ".join(error.messages),
            fields={"newPassword": list(error.messages)},
        ) from None
    user.set_password(new_password)
    user.save(update_fields=["password"])
