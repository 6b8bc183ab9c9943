"""The error code names a runtime reports through ``/fail``, with their retryable flags:
the server judges a failure by them (``config.errors`` re-exports the enum), the
reference runtime names its failures with them. No framework: the runtime imports it."""

from __future__ import annotations

from enum import Enum


class RuntimeErrorCode(Enum):
    """What a runtime reports through ``/fail``, with the retryable flag that decides
    between another attempt and a final failure. A runtime-reported ``JOB_TIMEOUT`` is
    final (the server's own expiry of a lapsed job retries instead). The older, more
    general names are taken too, so a runtime written against the first protocol is
    understood."""

    JOB_CANCELLED = ("JOB_CANCELLED", False)
    JOB_TIMEOUT = ("JOB_TIMEOUT", False)
    MODEL_TIMEOUT = ("MODEL_TIMEOUT", True)
    MODEL_RATE_LIMIT = ("MODEL_RATE_LIMIT", True)
    MODEL_NETWORK_ERROR = ("MODEL_NETWORK_ERROR", True)
    SNAPSHOT_FETCH_FAILED = ("SNAPSHOT_FETCH_FAILED", True)
    INVALID_SNAPSHOT = ("INVALID_SNAPSHOT", False)
    CREDENTIAL_RESOLVE_FAILED = ("CREDENTIAL_RESOLVE_FAILED", False)
    UNSUPPORTED_JOB_TYPE = ("UNSUPPORTED_JOB_TYPE", False)
    MODEL_RESPONSE_INVALID = ("MODEL_RESPONSE_INVALID", False)
    MODEL_JSON_PARSE_FAILED = ("MODEL_JSON_PARSE_FAILED", False)
    # The runtime stopped (shutdown, deploy) before the job finished: retryable, and
    # never the provider's fault, so it never counts towards the circuit breaker.
    RUNTIME_SHUTDOWN = ("RUNTIME_SHUTDOWN", True)
    # The first runtime protocol's names, with that protocol's retryable flags.
    NETWORK_ERROR = ("NETWORK_ERROR", True)
    TEMPORARY_PROVIDER_ERROR = ("TEMPORARY_PROVIDER_ERROR", True)
    INVALID_SCHEMA = ("INVALID_SCHEMA", False)
    INVALID_CREDENTIAL = ("INVALID_CREDENTIAL", False)

    def __init__(self, code: str, retryable: bool) -> None:
        self.code = code
        self.retryable = retryable

    @classmethod
    def codes(cls) -> list[str]:
        return [member.code for member in cls]

    @classmethod
    def from_code(cls, code: str) -> RuntimeErrorCode:
        return cls[code]
