"""Secrets at rest (model ``apiKey`` headers, forwarded OSS headers): AES-256-GCM.

The keys are the platform's one keyring (``credentials.crypto.keyring``: parsed from
``CREDENTIAL_ENCRYPTION_KEYS`` newest first, ids fixed by an ``id:`` prefix or derived
from the key itself, a development key from ``SECRET_KEY`` when none is set), so a
rotation that prepends a key never renames an old one. New values use the newest
key; old ones decrypt with the key they name.

A value is stored as ``v1:<key id>:<base64(nonce || ciphertext)>``; the key id is
bound as associated data, so a value relabelled with another key id never decrypts.
"""

from __future__ import annotations

import base64
import os

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from credentials.crypto import keyring


def _aad(key_id: str) -> bytes:
    return b"asynch\x00" + key_id.encode()


def encrypt(plain: str) -> str:
    if not plain:
        return ""
    key = keyring().current
    nonce = os.urandom(12)
    sealed = AESGCM(key.secret).encrypt(nonce, plain.encode(), _aad(key.key_id))
    return f"v1:{key.key_id}:{base64.b64encode(nonce + sealed).decode()}"


def decrypt(token: str | None) -> str:
    if not token:
        return ""
    version, key_id, payload = token.split(":", 2)
    if version != "v1":
        raise ValueError("Unknown secret format")
    key = keyring().get(key_id)
    if key is None:
        raise ValueError(f"The encryption key {key_id!r} is no longer configured")
    raw = base64.b64decode(payload)
    return AESGCM(key.secret).decrypt(raw[:12], raw[12:], _aad(key_id)).decode()
