"""Secrets at rest (model ``apiKey`` headers, forwarded OSS headers): AES-256-GCM.

Keys come from ``CREDENTIAL_ENCRYPTION_KEYS`` (base64 32-byte keys, newest first,
an optional ``id:`` prefix naming each), so they rotate with the rest of the
platform: new values use the first key, old ones decrypt with the key they name.
With no key set (the embedded default) one is derived from ``SECRET_KEY``.

A value is stored as ``v1:<key id>:<base64(nonce || ciphertext)>``.
"""

from __future__ import annotations

import base64
import hashlib
import os
from functools import lru_cache

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings

_AAD = b"asynch"


@lru_cache(maxsize=8)
def _keys(configured: tuple[str, ...], secret_key: str) -> tuple[tuple[str, bytes], ...]:
    keys: list[tuple[str, bytes]] = []
    for index, entry in enumerate(configured):
        key_id, sep, material = entry.partition(":")
        if not sep:
            key_id, material = f"k{index}", entry
        raw = base64.b64decode(material)
        if len(raw) != 32:
            raise ValueError("CREDENTIAL_ENCRYPTION_KEYS holds a key that is not 32 bytes")
        keys.append((key_id, raw))
    if not keys:
        keys.append(("sk", hashlib.sha256(b"asynch-secrets:" + secret_key.encode()).digest()))
    return tuple(keys)


def _current_keys() -> tuple[tuple[str, bytes], ...]:
    return _keys(tuple(settings.CREDENTIAL_ENCRYPTION_KEYS), settings.SECRET_KEY)


def encrypt(plain: str) -> str:
    if not plain:
        return ""
    key_id, key = _current_keys()[0]
    nonce = os.urandom(12)
    sealed = AESGCM(key).encrypt(nonce, plain.encode(), _AAD)
    return f"v1:{key_id}:{base64.b64encode(nonce + sealed).decode()}"


def decrypt(token: str | None) -> str:
    if not token:
        return ""
    version, key_id, payload = token.split(":", 2)
    if version != "v1":
        raise ValueError("Unknown secret format")
    key = dict(_current_keys()).get(key_id)
    if key is None:
        raise ValueError(f"The encryption key {key_id!r} is no longer configured")
    raw = base64.b64decode(payload)
    return AESGCM(key).decrypt(raw[:12], raw[12:], _AAD).decode()
