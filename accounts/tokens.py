"""The user API's JWTs: the token a client holds names its user by the
public id (``sub: "usr_…"``), never the database's integer key, and carries a digest
of the password it was issued under and of the account's token generation (``pwh``), so
that a new password, whoever set it (``POST /auth/password``, an operator in Django
admin), ends every token issued before, and so does a deactivation: while the user is
inactive no token is taken, and making them active again starts a new generation.

Issuing a token writes nothing: a refresh token gets its row in simplejwt's blacklist
tables (``accounts.services``) only when it is used up, by a refresh or a logout.

Every token also names its family (``fam``): a login starts one, and each refresh
token rotated from it, with the access tokens issued beside, carries it on. A refresh
token presented again after it was rotated ends its whole family (refresh token reuse
detection): the account lists the family as revoked, and every token that names it is
refused, checked on the account row each request reads anyway."""

from __future__ import annotations

import hmac
import secrets
import time

from django.contrib.auth.models import AbstractBaseUser
from django.utils.crypto import salted_hmac
from rest_framework_simplejwt import tokens
from rest_framework_simplejwt.settings import api_settings

from accounts.selectors import account_of, public_id_of

AUTH_HASH_CLAIM = "pwh"
FAMILY_CLAIM = "fam"
_AUTH_HASH_SALT = "accounts.tokens.auth_hash"

# The digest of each (user, password hash) this process has computed: every
# authenticated request compares it, and an HMAC each time was most of that check.
_AUTH_HASHES: dict[tuple[int, str, int], str] = {}
_AUTH_HASHES_MAX = 10_000


def token_auth_hash(user: AbstractBaseUser) -> str:
    """A digest of the user's password hash, as Django's session auth hash is (any new
    password changes it), and of their token generation. An HMAC under ``SECRET_KEY``,
    so a token tells nothing of the hash (simplejwt's own ``CHECK_REVOKE_TOKEN`` puts a
    bare MD5 of it in every token)."""
    generation = account_of(user).token_generation
    key = (user.pk, user.password, generation)
    value = _AUTH_HASHES.get(key)
    if value is None:
        text = f"{user.pk}:{user.password}" + (f":{generation}" if generation else "")
        value = salted_hmac(_AUTH_HASH_SALT, text, algorithm="sha256").hexdigest()[:32]
        if len(_AUTH_HASHES) >= _AUTH_HASHES_MAX:
            _AUTH_HASHES.clear()
        _AUTH_HASHES[key] = value
    return value


def revoked_families(revoked: str, now: float) -> dict[str, float]:
    """The families an account's ``revoked_families`` text lists, each with the time
    until which it is kept; those past it are left out."""
    families = {}
    for word in revoked.split():
        family, _, until = word.partition(":")
        try:
            if float(until) > now:
                families[family] = float(until)
        except ValueError:
            continue
    return families


def token_is_current(token: tokens.Token, user: AbstractBaseUser) -> bool:
    """Whether ``token`` was issued under the user's present password, and its family
    was not ended by a replayed refresh token. A token without the password claim
    (issued before tokens carried it) is not."""
    claimed = token.get(AUTH_HASH_CLAIM)
    if not (isinstance(claimed, str) and hmac.compare_digest(claimed, token_auth_hash(user))):
        return False
    revoked = account_of(user).revoked_families
    if revoked:  # almost always empty: nothing to parse
        family = token.get(FAMILY_CLAIM)
        if isinstance(family, str) and f"{family}:" in revoked and family in revoked_families(revoked, time.time()):
            return False
    return True


def _claims_for(token: tokens.Token, user: AbstractBaseUser, family: str | None = None) -> None:
    # simplejwt reads ``getattr(user, USER_ID_FIELD)``; the public id is on the account.
    token[api_settings.USER_ID_CLAIM] = public_id_of(user)
    token[AUTH_HASH_CLAIM] = token_auth_hash(user)
    token[FAMILY_CLAIM] = family or secrets.token_urlsafe(12)


class RefreshToken(tokens.RefreshToken):
    @classmethod
    def for_user(cls, user: AbstractBaseUser, family: str | None = None) -> RefreshToken:
        # Not simplejwt's: that one writes a row for every token issued.
        token = cls()
        _claims_for(token, user, family)
        return token


class AccessToken(tokens.AccessToken):
    @classmethod
    def for_user(cls, user: AbstractBaseUser) -> AccessToken:
        token = cls()
        _claims_for(token, user)
        return token


def token_pair(user: AbstractBaseUser, family: str | None = None) -> dict[str, str]:
    """A new pair: of a new family (a login), or of ``family`` (a refresh). The access
    token copies the refresh token's claims, its family included."""
    refresh = RefreshToken.for_user(user, family)
    return {"access": str(refresh.access_token), "refresh": str(refresh)}
