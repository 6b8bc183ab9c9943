"""How a user's model key is sealed with the platform's keyring (``config.keyring``:
AES-256-GCM, a fresh 96-bit nonce per encryption, key rotation).

The associated data binds the ciphertext to its owner, its credential row and its
key id: a ciphertext copied to another row, or a row whose key id was changed, fails
authentication instead of decrypting to a key that is not the row's. Nothing here
ever logs, formats or raises a clear key or a key's bytes.
"""

from __future__ import annotations

from collections.abc import Callable

from django.views.decorators.debug import sensitive_variables

from config import keyring
from config.keyring import Sealed

_AAD_VERSION = b"ai-model-credential/v1"


class CredentialDecryptError(Exception):
    """A stored key cannot be decrypted: unknown key id, or a ciphertext, nonce, key
    id or owner that does not authenticate. Never a wrong key."""


def associated_data(*, owner_id: str, credential_id: str, key_id: str) -> bytes:
    # NUL-separated: none of the parts can contain one, so no two tuples collide.
    return b"\x00".join([_AAD_VERSION, owner_id.encode(), credential_id.encode(), key_id.encode()])


def _binding(owner_id: str, credential_id: str) -> Callable[[str], bytes]:
    return lambda key_id: associated_data(owner_id=owner_id, credential_id=credential_id, key_id=key_id)


@sensitive_variables()
def seal(plaintext: str, *, owner_id: str, credential_id: str) -> Sealed:
    """Encrypt under the newest key with a fresh random nonce."""
    return keyring.seal(plaintext, associated_data=_binding(owner_id, credential_id))


@sensitive_variables()
def unseal(sealed: Sealed, *, owner_id: str, credential_id: str) -> str:
    """Decrypt with the key the row names; any mismatch raises, never a wrong key."""
    try:
        return keyring.unseal(sealed, associated_data=_binding(owner_id, credential_id), bound_to="owner")
    except keyring.DecryptError as error:
        raise CredentialDecryptError(
            f"Cannot decrypt credential {credential_id} (key id {sealed.key_id or '-'}): {error}"
        ) from None
