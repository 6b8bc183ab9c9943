"""The platform's one keyring: AES-256-GCM for every secret kept at rest (users'
model keys, model-asynch's ``apiKey`` headers and forwarded headers), with rotation.

``CREDENTIAL_ENCRYPTION_KEYS`` lists base64 32-byte keys, newest first; ``id:key``
names a key, a bare key gets an id derived from it (a fingerprint, so prepending a
key never renames an old one). New values use the first key; a value is read with
the key it names, so values written under an older key still open until
``rotate_encryption_keys`` has moved them to the newest one.

Every encryption takes a fresh random 96-bit nonce, and binds associated data that
the caller derives from the key id (and, for a user's key, its owner and row): a
ciphertext moved elsewhere, or relabelled with another key id, fails authentication
instead of opening. Nothing here ever logs, formats or raises a key's bytes.

With no key configured (the embedded default of ``make run``) a development key is
derived from ``SECRET_KEY`` with HKDF; a warning is logged and ``check --deploy``
flags it (``credentials.checks``).

Each app that keeps an encrypted column registers it here from its
``AppConfig.ready`` (``register_column``), so the rotation command re-encrypts every
one of them without importing the apps.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models, transaction
from django.views.decorators.debug import sensitive_variables

logger = logging.getLogger(__name__)

NONCE_BYTES = 12  # 96 bits, the size GCM is specified for
KEY_BYTES = 32  # AES-256
_DEV_KEY_INFO = b"ai-model-credential/dev-key/v1"
_KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
_TEXT_VERSION = "v1"
DEVELOPMENT_KEY_WARNING = (
    "CREDENTIAL_ENCRYPTION_KEYS is not set: secrets at rest (users' model keys, model-asynch headers) are "
    "encrypted with a development key derived from SECRET_KEY. Set CREDENTIAL_ENCRYPTION_KEYS in production."
)


class DecryptError(ValueError):
    """A value cannot be decrypted: unknown key id, or a ciphertext, nonce, key id or
    associated data that does not authenticate. Never a wrong plaintext."""


@dataclass(frozen=True)
class EncryptionKey:
    key_id: str
    secret: bytes = field(repr=False)

    def __repr__(self) -> str:
        return f"EncryptionKey({self.key_id!r}, ****)"


@dataclass(frozen=True)
class Keyring:
    keys: tuple[EncryptionKey, ...]
    development: bool = False

    @property
    def current(self) -> EncryptionKey:
        return self.keys[0]

    def get(self, key_id: str) -> EncryptionKey | None:
        return next((key for key in self.keys if key.key_id == key_id), None)


@dataclass(frozen=True)
class Sealed:
    """An encrypted value: the key id, the nonce and the ciphertext (with its GCM tag)."""

    key_id: str
    nonce: bytes
    ciphertext: bytes


# --- the keys -------------------------------------------------------------------------------


def derived_key_id(secret: bytes) -> str:
    # A one-way fingerprint: names the key without saying anything usable about it.
    return "k" + hashlib.sha256(b"ai-model-credential/key-id\x00" + secret).hexdigest()[:11]


@sensitive_variables()
def parse_key(entry: str) -> EncryptionKey:
    """One ``CREDENTIAL_ENCRYPTION_KEYS`` entry: ``base64`` or ``id:base64``.
    Errors say which entry is wrong, never what it holds."""
    entry = entry.strip()
    key_id, sep, encoded = entry.rpartition(":")
    if not sep:
        key_id, encoded = "", entry
    if sep and not _KEY_ID.match(key_id):
        raise ImproperlyConfigured("a key id must be 1 to 32 letters, digits, '_', '.' or '-'")
    try:
        secret = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ImproperlyConfigured("a key is not valid base64") from None
    if len(secret) != KEY_BYTES:
        raise ImproperlyConfigured(f"a key must decode to {KEY_BYTES} bytes, not {len(secret)}")
    return EncryptionKey(key_id=key_id or derived_key_id(secret), secret=secret)


@sensitive_variables()
def development_key(secret_key: str) -> EncryptionKey:
    secret = HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=_DEV_KEY_INFO).derive(
        secret_key.encode()
    )
    return EncryptionKey(key_id="dev-" + derived_key_id(secret)[1:9], secret=secret)


@functools.lru_cache(maxsize=8)
@sensitive_variables()
def _build_keyring(entries: tuple[str, ...], secret_key: str) -> Keyring:
    if not entries:
        if settings.CREDENTIAL_DEV_KEY_WARNING:
            logger.warning(DEVELOPMENT_KEY_WARNING)
        return Keyring(keys=(development_key(secret_key),), development=True)
    keys: list[EncryptionKey] = []
    for position, entry in enumerate(entries, start=1):
        try:
            key = parse_key(entry)
        except ImproperlyConfigured as error:
            raise ImproperlyConfigured(f"CREDENTIAL_ENCRYPTION_KEYS entry {position}: {error}") from None
        if any(known.key_id == key.key_id for known in keys):
            raise ImproperlyConfigured(f"CREDENTIAL_ENCRYPTION_KEYS entry {position}: key id {key.key_id} repeats")
        keys.append(key)
    return Keyring(keys=tuple(keys))


def keyring() -> Keyring:
    """The configured keys, parsed once per configuration."""
    entries = tuple(e for e in (entry.strip() for entry in settings.CREDENTIAL_ENCRYPTION_KEYS) if e)
    return _build_keyring(entries, settings.SECRET_KEY)


# --- sealing -------------------------------------------------------------------------------------


@sensitive_variables()
def seal(plaintext: str, *, associated_data: Callable[[str], bytes]) -> Sealed:
    """Encrypt under the newest key with a fresh random nonce; ``associated_data``
    gives the bytes bound to the ciphertext for a key id."""
    key = keyring().current
    nonce = os.urandom(NONCE_BYTES)
    ciphertext = AESGCM(key.secret).encrypt(nonce, plaintext.encode(), associated_data(key.key_id))
    return Sealed(key_id=key.key_id, nonce=nonce, ciphertext=ciphertext)


@sensitive_variables()
def unseal(sealed: Sealed, *, associated_data: Callable[[str], bytes], bound_to: str = "associated data") -> str:
    """Decrypt with the key the value names; any mismatch raises DecryptError (its
    message names what failed, ``bound_to`` what the associated data binds)."""
    key = keyring().get(sealed.key_id)
    if key is None:
        raise DecryptError("that key id is not in CREDENTIAL_ENCRYPTION_KEYS")
    if len(sealed.nonce) != NONCE_BYTES:
        raise DecryptError(f"the stored nonce is not {NONCE_BYTES} bytes")
    try:
        clear = AESGCM(key.secret).decrypt(
            bytes(sealed.nonce), bytes(sealed.ciphertext), associated_data(sealed.key_id)
        )
    except InvalidTag:
        raise DecryptError(f"authentication failed (ciphertext, nonce, key id or {bound_to} altered)") from None
    try:
        return clear.decode()
    except UnicodeDecodeError:  # unreachable with an authentic ciphertext; refuse rather than guess
        raise DecryptError("the plaintext is not text") from None


def _text_context(context: bytes) -> Callable[[str], bytes]:
    return lambda key_id: context + b"\x00" + key_id.encode()


@sensitive_variables()
def seal_text(plaintext: str, *, context: bytes) -> str:
    """A secret kept in one text column: ``v1:<key id>:<base64(nonce || ciphertext)>``,
    the key id bound under ``context`` (what the column is). Empty stays empty."""
    if not plaintext:
        return ""
    sealed = seal(plaintext, associated_data=_text_context(context))
    return f"{_TEXT_VERSION}:{sealed.key_id}:{base64.b64encode(sealed.nonce + sealed.ciphertext).decode()}"


@sensitive_variables()
def open_text(token: str | None, *, context: bytes) -> str:
    """The clear text of a ``seal_text`` value (empty for an empty one)."""
    if not token:
        return ""
    version, _, rest = token.partition(":")
    key_id, _, payload = rest.partition(":")
    if version != _TEXT_VERSION or not payload:
        raise DecryptError("unknown secret format")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise DecryptError("the stored value is not base64") from None
    sealed = Sealed(key_id=key_id, nonce=raw[:NONCE_BYTES], ciphertext=raw[NONCE_BYTES:])
    return unseal(sealed, associated_data=_text_context(context))


# --- rotation ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RotatedBatch:
    """One batch of a column's rotation: ``read`` rows after the cursor, up to ``last_id``."""

    read: int
    last_id: str
    rotated: int
    failed: tuple[str, ...] = ()


class EncryptedColumn(Protocol):
    """A column an app keeps encrypted with the keyring."""

    name: str  # what it holds, for people: "users' model keys"
    noun: str  # what one row is: "credential", as in "5 credential(s) re-encrypted"

    def rotate_batch(self, *, current_key_id: str, after: str, limit: int) -> RotatedBatch:
        """Re-encrypt under ``current_key_id`` the first ``limit`` rows after ``after``
        (by primary key) that another key encrypted, in one short transaction; a row
        changed meanwhile is left as its writer left it, a row that does not open is
        reported."""
        ...

    def remaining(self, *, current_key_id: str) -> int:
        """Rows still encrypted under another key."""
        ...


@dataclass
class RotationReport:
    column: str
    noun: str
    current_key_id: str
    rotated: int = 0
    batches: int = 0
    failed: list[str] = field(default_factory=list)
    remaining: int = 0


_COLUMNS: dict[str, EncryptedColumn] = {}


def register_column(column: EncryptedColumn) -> None:
    """From an ``AppConfig.ready``: the column takes part in every rotation."""
    _COLUMNS[column.name] = column


def registered_columns() -> list[EncryptedColumn]:
    return list(_COLUMNS.values())


def rotate(
    column: EncryptedColumn, *, batch_size: int = 500, on_batch: Callable[[RotationReport], None] | None = None
) -> RotationReport:
    """Walk the column by primary key in batches, re-encrypting under the newest key
    whatever another key encrypted; then count what still is."""
    current = keyring().current.key_id
    report = RotationReport(column=column.name, noun=column.noun, current_key_id=current)
    after = ""
    while True:
        batch = column.rotate_batch(current_key_id=current, after=after, limit=batch_size)
        if not batch.read:
            break
        report.batches += 1
        report.rotated += batch.rotated
        report.failed += batch.failed
        if on_batch is not None:
            on_batch(report)
        after = batch.last_id
        if batch.read < batch_size:
            break
    report.remaining = column.remaining(current_key_id=current)
    logger.info(
        "key rotation of %s to %s: %d rotated, %d failed, %d left",
        column.name,
        current,
        report.rotated,
        len(report.failed),
        report.remaining,
    )
    return report


@dataclass(frozen=True)
class TextColumn:
    """A model's text column of ``seal_text`` values (empty or null: nothing kept)."""

    name: str
    noun: str
    model: type[models.Model]
    field: str
    context: bytes

    def _under_another_key(self, current_key_id: str) -> models.QuerySet[Any]:
        return (
            self.model._default_manager.exclude(**{f"{self.field}__isnull": True})
            .exclude(**{self.field: ""})
            .exclude(**{f"{self.field}__startswith": f"{_TEXT_VERSION}:{current_key_id}:"})
        )

    def rotate_batch(self, *, current_key_id: str, after: str, limit: int) -> RotatedBatch:
        rows = list(
            self._under_another_key(current_key_id)
            .filter(pk__gt=after)
            .order_by("pk")
            .values_list("pk", self.field)[:limit]
        )
        if not rows:
            return RotatedBatch(read=0, last_id=after, rotated=0)
        rotated, failed = 0, []
        with transaction.atomic():
            for pk, token in rows:
                try:
                    clear = open_text(token, context=self.context)
                except DecryptError as error:
                    logger.error("key rotation skipped %s %s: %s", self.noun, pk, error)
                    failed.append(str(pk))
                    continue
                # Only if it still holds what was read: a value replaced meanwhile stays.
                rotated += self.model._default_manager.filter(pk=pk, **{self.field: token}).update(
                    **{self.field: seal_text(clear, context=self.context)}
                )
        return RotatedBatch(read=len(rows), last_id=str(rows[-1][0]), rotated=rotated, failed=tuple(failed))

    def remaining(self, *, current_key_id: str) -> int:
        return self._under_another_key(current_key_id).count()
