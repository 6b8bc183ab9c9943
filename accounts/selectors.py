"""Reads of users' public ids and usernames."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import OuterRef, Subquery

from accounts import queries
from accounts.models import Account
from accounts.usernames import username_key
from config.sql import fetch, from_row

# ``targetId`` of a ``user`` target that names the caller.
ME = "me"


def account_of(user: AbstractBaseUser) -> Account:
    """The user's account: the joined row when the user was loaded with it
    (``select_related("account")``, as the JWT authentication does), else one read,
    kept on the instance."""
    try:
        return user.account  # type: ignore[attr-defined,no-any-return]
    except Account.DoesNotExist:
        # A user made without post_save (bulk_create) gets its account on first use.
        account, _ = Account.objects.get_or_create(user_id=user.pk)
        user.account = account  # type: ignore[attr-defined]
        return account


def public_id_of(user: AbstractBaseUser) -> str:
    """The user's public id (``account_of``)."""
    return account_of(user).public_id


def user_known_as(*, user_id: int, public_id: str) -> AbstractBaseUser:
    """A user carrying only its primary key and public id, both read already (with a
    job, say), for code that needs nothing else of it: no statement. Never saved."""
    user = get_user_model()(pk=user_id)
    user.account = Account(user_id=user_id, public_id=public_id)  # type: ignore[attr-defined]
    return user


def public_ids_of(user_ids: set[int] | list[int]) -> dict[int, str]:
    """The public ids of several users, in one statement."""
    return dict(Account.objects.filter(user_id__in=list(user_ids)).values_list("user_id", "public_id"))


def public_id_subquery(user_field: str = "user_id") -> Subquery:
    """An annotation giving each row the public id of its user, computed by the
    database in the row's own statement."""
    return Subquery(Account.objects.filter(user_id=OuterRef(user_field)).values("public_id")[:1])


def names_user(user: AbstractBaseUser, target_id: str | None) -> bool:
    """Whether ``target_id`` names ``user``: ``"me"`` or their own public id."""
    return target_id == ME or (target_id is not None and target_id == public_id_of(user))


def resolve_me(user: AbstractBaseUser, target_id: str) -> str:
    """``"me"`` as the caller's public id; any other id as it is."""
    return public_id_of(user) if target_id == ME else target_id


def user_with_account(public_id: str) -> AbstractBaseUser | None:
    """The user named by ``public_id`` with their account joined (``public_id_of`` then
    costs nothing), in one fixed statement; ``None`` when there is none."""
    rows = fetch(queries.USER_WITH_ACCOUNT, {"public_id": public_id})
    if not rows:
        return None
    user = from_row(get_user_model(), rows[0])
    user.account = from_row(Account, rows[0][-len(Account._meta.concrete_fields) :])  # type: ignore[attr-defined]
    return user


def username_taken(username: str, *, other_than: int | None = None) -> bool:
    """Whether an account other than user ``other_than``'s holds a name that is one
    with ``username`` (``accounts.usernames``)."""
    return Account.objects.filter(username_key=username_key(username)).exclude(user_id=other_than).exists()


def user_by_username(username: str) -> AbstractBaseUser | None:
    """The user a login names, whatever the spelling: the one with exactly that
    (normalized) username, else the account holding its key. The exact match first,
    for the accounts that shared their key with an older one when keys came in
    (the migration that added keys): they log in with their own spelling."""
    user_model = get_user_model()
    exact = user_model._default_manager.filter(username=username).first()
    if exact is not None:
        return exact
    return user_model._default_manager.filter(account__username_key=username_key(username)).first()
