"""System checks: the key configuration parses (always), and production does not
run on the development key derived from SECRET_KEY (``check --deploy``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from config import keyring


@checks.register(checks.Tags.security)
def check_encryption_keys(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    try:
        keyring.keyring()
    except ImproperlyConfigured as error:
        return [
            checks.Error(
                str(error), hint="base64 32-byte keys, newest first, each optionally 'id:key'.", id="credentials.E001"
            )
        ]
    return []


@checks.register(checks.Tags.security, deploy=True)
def check_encryption_keys_deploy(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if any(entry.strip() for entry in settings.CREDENTIAL_ENCRYPTION_KEYS):
        return []
    return [
        checks.Warning(
            "CREDENTIAL_ENCRYPTION_KEYS is not set: secrets at rest (users' model keys, model-asynch headers) "
            "are encrypted with a development key derived from SECRET_KEY.",
            hint="Set CREDENTIAL_ENCRYPTION_KEYS to one or more base64 32-byte keys, e.g. "
            "python -c 'import base64,os; print(base64.b64encode(os.urandom(32)).decode())'.",
            id="credentials.W001",
        )
    ]
