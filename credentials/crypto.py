"""AES-256-GCM for users' model keys, with key rotation.

``CREDENTIAL_ENCRYPTION_KEYS`` lists base64 32-byte keys, newest first; ``id:key``
names a key, a bare key gets an id derived from it. New writes use the first key;
a read uses the key its row names, so rows written under an older key still decrypt
until ``rotate_credential_keys`` has moved them to the newest one.

Every encryption takes a fresh random 96-bit nonce. The associated data binds the
ciphertext to its owner, its credential row and its key id: a ciphertext copied to
another row, or a row whose key id was changed, fails authentication instead of
decrypting to a key that is not the row's. Nothing here ever logs, formats or raises
a clear key or a key's bytes.

With no key configured (the embedded default of ``make run``) a development key is
derived from ``SECRET_KEY`` with HKDF; a warning is logged and ``check --deploy``
flags it (``credentials.checks``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import logging
import os
import re
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.views.decorators.debug import sensitive_variables

logger = logging.getLogger(__name__)

NONCE_BYTES = 12  # 96 bits, the size GCM is specified for
KEY_BYTES = 32  # AES-256
_AAD_VERSION = b"ai-model-credential/v1"
_DEV_KEY_INFO = b"ai-model-credential/dev-key/v1"
_KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")


class CredentialDecryptError(Exception):
    """A stored key cannot be decrypted: unknown key id, or a ciphertext, nonce,
    key id or owner that does not authenticate. Never a wrong key."""


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
    """What is stored: the key id, the nonce and the ciphertext (with its GCM tag)."""

    key_id: str
    nonce: bytes
    ciphertext: bytes


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
        logger.warning(
            "CREDENTIAL_ENCRYPTION_KEYS is not set: users' model keys are encrypted with a development key "
            "derived from SECRET_KEY. Set CREDENTIAL_ENCRYPTION_KEYS in production."
        )
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


def associated_data(*, owner_id: str, credential_id: str, key_id: str) -> bytes:
    # NUL-separated: none of the parts can contain one, so no two tuples collide.
    return b"\x00".join([_AAD_VERSION, owner_id.encode(), credential_id.encode(), key_id.encode()])


@sensitive_variables()
def seal(plaintext: str, *, owner_id: str, credential_id: str) -> Sealed:
    """Encrypt under the newest key with a fresh random nonce."""
    key = keyring().current
    nonce = os.urandom(NONCE_BYTES)
    aad = associated_data(owner_id=owner_id, credential_id=credential_id, key_id=key.key_id)
    return Sealed(key_id=key.key_id, nonce=nonce, ciphertext=AESGCM(key.secret).encrypt(nonce, plaintext.encode(), aad))


@sensitive_variables()
def unseal(sealed: Sealed, *, owner_id: str, credential_id: str) -> str:
    """Decrypt with the key the row names; any mismatch raises, never a wrong key."""
    where = f"credential {credential_id} (key id {sealed.key_id or '-'})"
    key = keyring().get(sealed.key_id)
    if key is None:
        raise CredentialDecryptError(f"Cannot decrypt {where}: that key id is not in CREDENTIAL_ENCRYPTION_KEYS")
    if len(sealed.nonce) != NONCE_BYTES:
        raise CredentialDecryptError(f"Cannot decrypt {where}: the stored nonce is not {NONCE_BYTES} bytes")
    aad = associated_data(owner_id=owner_id, credential_id=credential_id, key_id=sealed.key_id)
    try:
        clear = AESGCM(key.secret).decrypt(bytes(sealed.nonce), bytes(sealed.ciphertext), aad)
    except InvalidTag:
        raise CredentialDecryptError(
            f"Cannot decrypt {where}: authentication failed (ciphertext, nonce, key id or owner altered)"
        ) from None
    try:
        return clear.decode()
    except UnicodeDecodeError:  # unreachable with an authentic ciphertext; refuse rather than guess
        raise CredentialDecryptError(f"Cannot decrypt {where}: the plaintext is not text") from None
