"""A user's public side: the opaque id that stands for them on the wire
(``userId`` is a string such as ``usr_01j…``, never the database's integer key).

Its own table, one row per ``auth.User``, created with the user (``post_save``) and
backfilled for the users that existed before it: Django's ``auth.User`` cannot gain
a column without swapping the user model, which an existing database does not allow.
Reads that render many users' ids join it (one statement, not one per row).

It also holds ``token_generation`` (``accounts.tokens``) and ``username_key``
(``accounts.usernames``), unique: the database, not a check before an insert, is what
keeps two registrations of ``alice`` and ``ALICE`` racing each other from both succeeding, on PostgreSQL and SQLite alike (a unique
expression index on ``auth_user`` would need ``lower()``, which differs from Python's
casefold on PostgreSQL and knows only ASCII on SQLite). Empty (NULL) only for an
account that shared its key with an older one when the key was introduced (docs/api/authentication.md)."""

from __future__ import annotations

from functools import partial

from django.conf import settings
from django.db import models
from django.utils import timezone

from config.ids import new_id

PUBLIC_ID_PREFIX = "usr"


class Account(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, primary_key=True, on_delete=models.CASCADE, related_name="account"
    )
    public_id = models.CharField(max_length=40, unique=True, default=partial(new_id, PUBLIC_ID_PREFIX), editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    # A TextField: casefolding may lengthen a name past the username's 150 characters.
    username_key = models.TextField(unique=True, null=True, editable=False)
    # Tokens carry it in their digest (accounts.tokens): a user made active again gets a
    # new one, so tokens issued before a deactivation stay dead after it.
    token_generation = models.PositiveIntegerField(default=0, db_default=0, editable=False)
    # The refresh-token families of this user that a replayed refresh token ended
    # (accounts.services): "family:until" words, each kept while a token of its family
    # could still be valid. Read with the user on every request, so the check costs no statement.
    revoked_families = models.TextField(default="", db_default="", blank=True, editable=False)

    class Meta:
        db_table = "accounts_account"

    def __str__(self) -> str:
        return self.public_id
