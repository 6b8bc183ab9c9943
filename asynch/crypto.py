"""model-asynch's secrets at rest (model ``apiKey`` headers, forwarded OSS headers),
sealed with the platform's one keyring (``config.keyring``) as
``v1:<key id>:<base64(nonce || ciphertext)>``, the key id bound under this app's
context, so a value relabelled with another key id never decrypts. Both columns take
part in ``rotate_encryption_keys`` (registered in ``AsynchConfig.ready``)."""

from __future__ import annotations

from config import keyring

CONTEXT = b"asynch"


def encrypt(plain: str) -> str:
    return keyring.seal_text(plain, context=CONTEXT)


def decrypt(token: str | None) -> str:
    return keyring.open_text(token, context=CONTEXT)
