"""Every write to users' model credentials, the provider test, the resolve for a
runtime, and key rotation.

A clear key lives only in the locals of these functions (all marked
``sensitive_variables``, so an exception report shows stars) and leaves only
through ``credential_resolve`` to the lock holder of a job, and as the
``Authorization`` header of the provider test. Log lines name ids and masks.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import requests
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from config import keyring
from config.errors import DomainError, ErrorCode
from credentials import crypto
from credentials.models import Credential, CredentialStatus, Provider

logger = logging.getLogger(__name__)

API_KEY_MIN, API_KEY_MAX = 8, 512
_API_KEY = re.compile(r"^[\x21-\x7e]+$")  # printable ASCII, no spaces
DEFAULT_TEST_TIMEOUT_SECONDS = 10.0
# The header the local stand-in model (runtime_worker.standin, which ``make run`` starts
# when no platform key is set) puts on every answer: it accepts any key.
STANDIN_HEADER = "X-Standin"
STANDIN_ACCEPTS_ANY_KEY = "accepts-any-key"


def _invalid(field_name: str, message: str) -> DomainError:
    return DomainError(
        ErrorCode.VALIDATION_ERROR, f"Request validation failed: {message}", fields={field_name: [message]}
    )


@sensitive_variables()
def _check_api_key(api_key: str) -> None:
    # The messages never quote the value.
    if not API_KEY_MIN <= len(api_key) <= API_KEY_MAX:
        raise _invalid("apiKey", f"The key must be {API_KEY_MIN} to {API_KEY_MAX} characters long.")
    if not _API_KEY.match(api_key):
        raise _invalid("apiKey", "The key may contain only printable characters without spaces.")


def _check_name(name: str) -> str:
    name = name.strip()
    if not 1 <= len(name) <= 100:
        raise _invalid("name", "The name must be 1 to 100 characters long.")
    return name


@sensitive_variables()
def mask_key(api_key: str) -> str:
    """``sk-****abcd``: the conventional prefix and, for a key long enough that it
    says little, the last four characters."""
    prefix = "sk-" if api_key.startswith("sk-") else ""
    tail = api_key[-4:] if len(api_key) >= 16 else ""
    return f"{prefix}****{tail}"


def _sealed_of(credential: Credential) -> crypto.Sealed:
    return crypto.Sealed(
        key_id=credential.key_id, nonce=bytes(credential.nonce), ciphertext=bytes(credential.ciphertext)
    )


@sensitive_variables()
def _clear_key(credential: Credential) -> str:
    return crypto.unseal(_sealed_of(credential), owner_id=str(credential.user_id), credential_id=credential.id)


@sensitive_variables()
def _seal_into(credential: Credential, api_key: str) -> None:
    sealed = crypto.seal(api_key, owner_id=str(credential.user_id), credential_id=credential.id)
    credential.key_id, credential.nonce, credential.ciphertext = sealed.key_id, sealed.nonce, sealed.ciphertext
    credential.key_mask = mask_key(api_key)


def _not_found() -> DomainError:
    # One message for missing, deleted and another user's: the answer says nothing about which.
    return DomainError(ErrorCode.CREDENTIAL_NOT_FOUND, "Credential not found")


# --- the user's CRUD -----------------------------------------------------------------


@sensitive_variables()
def credential_create(
    *, user: AbstractBaseUser, name: str, api_key: str, provider: str = Provider.DEEPSEEK
) -> Credential:
    _check_api_key(api_key)
    if provider not in Provider.values:
        raise _invalid("provider", f"Supported providers: {', '.join(Provider.values)}.")
    credential = Credential(user=user, name=_check_name(name), provider=provider)
    _seal_into(credential, api_key)
    credential.save(force_insert=True)
    logger.info("credential %s created for user %s (%s)", credential.id, user.pk, credential.key_mask)
    return credential


@sensitive_variables()
def credential_update(*, credential: Credential, name: str | None = None, api_key: str | None = None) -> Credential:
    """Rename, and/or replace the key: a new key is sealed afresh under the newest
    encryption key, and its status and last test start over."""
    changes: dict[str, object] = {"updated_at": timezone.now()}
    if name is not None:
        changes["name"] = credential.name = _check_name(name)
    if api_key is not None:
        _check_api_key(api_key)
        _seal_into(credential, api_key)
        credential.status = CredentialStatus.ACTIVE
        credential.last_tested_at = credential.last_test_ok = credential.last_test_http_status = None
        credential.last_test_message = ""
        for attr in (
            "key_id",
            "nonce",
            "ciphertext",
            "key_mask",
            "status",
            "last_tested_at",
            "last_test_ok",
            "last_test_http_status",
            "last_test_message",
        ):
            changes[attr] = getattr(credential, attr)
    if not Credential.objects.filter(id=credential.id, deleted_at__isnull=True).update(**changes):
        raise _not_found()
    credential.updated_at = changes["updated_at"]  # type: ignore[assignment]
    logger.info(
        "credential %s updated (%s)%s", credential.id, credential.key_mask, " with a new key" if api_key else ""
    )
    return credential


def credential_delete(*, credential: Credential) -> None:
    """Soft deletion: the row stays (jobs name it) but the sealed key is wiped, so a
    deleted key exists nowhere, not even encrypted."""
    now = timezone.now()
    deleted = Credential.objects.filter(id=credential.id, deleted_at__isnull=True).update(
        deleted_at=now, status=CredentialStatus.DELETED, key_id="", nonce=b"", ciphertext=b"", updated_at=now
    )
    if not deleted:
        raise _not_found()
    logger.info("credential %s deleted (%s)", credential.id, credential.key_mask)


# --- the provider test ---------------------------------------------------------------------


@dataclass(frozen=True)
class CredentialTestOutcome:
    ok: bool
    http_status: int | None
    message: str


@sensitive_variables()
def credential_test(*, credential: Credential) -> CredentialTestOutcome:
    """Ask the provider for its model list with the key (``GET {base}/models``). A 401
    marks the key invalid, a success active; anything else leaves the status alone.
    The provider's body is never echoed: some providers quote the key back."""
    timeout = float(getattr(settings, "CREDENTIAL_TEST_TIMEOUT_SECONDS", DEFAULT_TEST_TIMEOUT_SECONDS))
    new_status: str | None = None
    try:
        api_key = _clear_key(credential)
    except crypto.CredentialDecryptError as error:
        logger.error("credential test: %s", error)
        outcome = CredentialTestOutcome(False, None, "The stored key cannot be decrypted; enter the key again.")
    else:
        url = credential.effective_base_url.rstrip("/") + "/models"
        try:
            response = requests.get(
                url,
                headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
                timeout=timeout,
                allow_redirects=False,  # the key goes to the configured host and nowhere else
            )
        except requests.Timeout:
            outcome = CredentialTestOutcome(False, None, f"The provider did not answer within {timeout:g} seconds.")
        except requests.RequestException as error:
            outcome = CredentialTestOutcome(False, None, f"Could not reach the provider ({type(error).__name__}).")
        else:
            outcome = _outcome_of(response.status_code)
            if outcome.ok and response.headers.get(STANDIN_HEADER) == STANDIN_ACCEPTS_ANY_KEY:
                outcome = CredentialTestOutcome(
                    True,
                    response.status_code,
                    "The local stand-in model answered (not DeepSeek): it accepts any key, "
                    "so this test says nothing about the key itself.",
                )
            response.close()
            if outcome.ok:
                new_status = CredentialStatus.ACTIVE
            elif response.status_code == 401:
                new_status = CredentialStatus.INVALID
    changes: dict[str, object] = {
        "last_tested_at": timezone.now(),
        "last_test_ok": outcome.ok,
        "last_test_http_status": outcome.http_status,
        "last_test_message": outcome.message[:255],
    }
    if new_status is not None:
        changes["status"] = new_status
    # Only if the key tested is still the row's key: a key replaced meanwhile keeps its fresh state.
    Credential.objects.filter(id=credential.id, deleted_at__isnull=True, nonce=bytes(credential.nonce)).update(
        **changes
    )
    for attr, value in changes.items():
        setattr(credential, attr, value)
    logger.info(
        "credential %s tested (%s): ok=%s http=%s", credential.id, credential.key_mask, outcome.ok, outcome.http_status
    )
    return outcome


def _outcome_of(status_code: int) -> CredentialTestOutcome:
    if 200 <= status_code < 300:
        return CredentialTestOutcome(True, status_code, "The provider accepted the key.")
    if status_code == 401:
        return CredentialTestOutcome(False, status_code, "The provider rejected the key (HTTP 401); it is now invalid.")
    if status_code == 429:
        return CredentialTestOutcome(False, status_code, "The provider is rate limiting (HTTP 429); try again later.")
    return CredentialTestOutcome(False, status_code, f"The provider answered HTTP {status_code}.")


# --- the runtime's resolve -----------------------------------------------------


@dataclass(frozen=True)
class UserKey:
    provider: str
    base_url: str
    api_key: str = field(repr=False)

    def __repr__(self) -> str:
        return f"UserKey({self.provider}, {self.base_url}, ****)"


# The columns ``credential_unseal`` needs, in its order, for a caller that reads them
# in its own statement (the runtime's credential call joins them to the job's row).
RESOLVE_COLUMNS = ("id", "provider", "base_url", "key_id", "nonce", "ciphertext")


@sensitive_variables()
def credential_resolve(*, user_id: int | str, credential_id: str) -> UserKey:
    """The user's decrypted key, for ``job_credential`` (which has already checked
    that the caller holds the job's lease). Missing, deleted or another user's:
    ``CREDENTIAL_NOT_FOUND``. A key that does not decrypt is an error, never a guess;
    the runtime reports ``CREDENTIAL_RESOLVE_FAILED``."""
    row = (
        Credential.objects.filter(id=credential_id, user_id=user_id, deleted_at__isnull=True)
        .values_list(*RESOLVE_COLUMNS)
        .first()
    )
    return credential_unseal(user_id=user_id, credential_id=credential_id, row=row)


@sensitive_variables()
def credential_unseal(*, user_id: int | str, credential_id: str, row: Sequence[Any] | None) -> UserKey:
    """The clear key of a live credential row of this user, read as ``RESOLVE_COLUMNS``
    (None: missing, deleted or another user's, ``CREDENTIAL_NOT_FOUND``). A key that
    does not decrypt: ``CREDENTIAL_RESOLVE_FAILED``, never a wrong key."""
    if row is None or row[0] is None:
        raise DomainError(ErrorCode.CREDENTIAL_NOT_FOUND, f"Credential {credential_id} not found or deleted")
    found_id, provider, base_url, key_id, nonce, ciphertext = row
    sealed = crypto.Sealed(key_id=key_id, nonce=bytes(nonce), ciphertext=bytes(ciphertext))
    try:
        api_key = crypto.unseal(sealed, owner_id=str(user_id), credential_id=found_id)
    except crypto.CredentialDecryptError as error:
        logger.error("credential resolve failed: %s", error)
        raise DomainError(ErrorCode.CREDENTIAL_RESOLVE_FAILED, f"{error}. The credential cannot be resolved.") from None
    return UserKey(provider=provider, base_url=base_url or settings.DEEPSEEK_BASE_URL, api_key=api_key)


# --- key rotation -----------------------------------------------------------------------------


class CredentialKeys:
    """The users' keys as one of the keyring's encrypted columns (``config.keyring``):
    what ``rotate_encryption_keys`` re-encrypts of this app."""

    name = "users' model keys"
    noun = "credential"

    def _under_another_key(self, current_key_id: str) -> QuerySet[Credential]:
        return Credential.objects.filter(deleted_at__isnull=True).exclude(key_id=current_key_id)

    @sensitive_variables()
    def rotate_batch(self, *, current_key_id: str, after: str, limit: int) -> keyring.RotatedBatch:
        """Re-seal live rows not under the newest key, in one short transaction. Each
        row is rewritten only if it still holds what was read (key id and nonce), so a
        key the user replaces meanwhile is never overwritten with the old one. Rows
        that do not decrypt are reported, not touched."""
        rows = list(
            self._under_another_key(current_key_id)
            .filter(id__gt=after)
            .order_by("id")
            .only("id", "user_id", "key_id", "nonce", "ciphertext")[:limit]
        )
        if not rows:
            return keyring.RotatedBatch(read=0, last_id=after, rotated=0)
        rotated, failed = 0, []
        with transaction.atomic():
            for row in rows:
                try:
                    clear = _clear_key(row)
                except crypto.CredentialDecryptError as error:
                    logger.error("rotation skipped: %s", error)
                    failed.append(row.id)
                    continue
                sealed = crypto.seal(clear, owner_id=str(row.user_id), credential_id=row.id)
                rotated += Credential.objects.filter(id=row.id, key_id=row.key_id, nonce=bytes(row.nonce)).update(
                    key_id=sealed.key_id, nonce=sealed.nonce, ciphertext=sealed.ciphertext
                )
        return keyring.RotatedBatch(read=len(rows), last_id=rows[-1].id, rotated=rotated, failed=tuple(failed))

    def remaining(self, *, current_key_id: str) -> int:
        return self._under_another_key(current_key_id).count()


CREDENTIAL_KEYS = CredentialKeys()


def credentials_rotate_keys(*, batch_size: int = 500) -> keyring.RotationReport:
    """Re-seal every live row not yet under the newest key, in batches of short
    transactions walked by id (``rotate_encryption_keys`` does this for every
    encrypted column)."""
    return keyring.rotate(CREDENTIAL_KEYS, batch_size=batch_size)
