"""The runtime's settings: the ``RUNTIME_*`` variables of its environment, and nothing
of the server's (contract section 7): a runtime machine holds no ``SECRET_KEY``, no
credential encryption key and no database URL."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from runtime_worker import prompts

DEFAULT_API_URL = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class RuntimeConfig:
    api_url: str
    token: str
    instance_id: str
    capabilities: list[str] = field(default_factory=prompts.job_types)
    concurrency: int = 4
    heartbeat_seconds: float = 20.0
    poll_interval_ms: int = 1000
    # SIGTERM: stop claiming, let running jobs finish for this long, then report
    # what is still running as a retryable failure.
    grace_seconds: float = 30.0
    # After the grace period: how long the last failure reports may still take.
    final_report_seconds: float = 10.0
    # One model call never waits longer than this (nor past the job's timeoutSeconds).
    model_timeout_seconds: float = 180.0
    # A job's work (its model call included) ends this long before its timeoutSeconds
    # (a quarter of a short timeout at most), so that the failure it reports reaches
    # the server while the attempt is live: the server refuses one that comes later.
    deadline_margin_seconds: float = 5.0
    # How long a result or failure the runtime holds is retried while the API is
    # unreachable. Past the lease the server refuses it anyway (JOB_NOT_ACTIVE).
    submit_retry_seconds: float = 300.0
    api_timeout_seconds: float = 15.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> RuntimeConfig:
        """The ``RUNTIME_*`` variables of the environment, and nothing else of it:
        the runtime reads none of the server's settings. ``overrides`` (the command
        line's) win where given."""
        env = os.environ if environ is None else environ

        def number(name: str, default: float, kind: type = float) -> Any:
            text = env.get(name, "").strip()
            if not text:
                return default
            try:
                return kind(text)
            except ValueError:
                raise RuntimeConfigError(f"{name}={text!r} is not a number") from None

        capabilities = [c.strip() for c in env.get("RUNTIME_CAPABILITIES", "").split(",") if c.strip()]
        config = cls(
            api_url=env.get("RUNTIME_API_URL", "").strip() or DEFAULT_API_URL,
            token=env.get("RUNTIME_SERVICE_TOKEN", "").strip(),
            instance_id=env.get("RUNTIME_INSTANCE_ID", "").strip() or default_instance_id(),
            capabilities=capabilities or prompts.job_types(),
            concurrency=number("RUNTIME_CONCURRENCY", 4, int),
            heartbeat_seconds=number("RUNTIME_HEARTBEAT_SECONDS", 20.0),
            poll_interval_ms=number("RUNTIME_POLL_INTERVAL_MS", 1000, int),
        )
        return replace(config, **{key: value for key, value in overrides.items() if value is not None})


class RuntimeConfigError(ValueError):
    """A ``RUNTIME_*`` variable the runtime cannot use."""


def default_instance_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"
