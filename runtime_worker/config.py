"""The runtime's settings (``RUNTIME_*``), read from Django settings, which read
them from the environment."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field, replace
from typing import Any

from runtime_worker import prompts


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
    def from_settings(cls, **overrides: Any) -> RuntimeConfig:
        from django.conf import settings

        config = cls(
            api_url=settings.RUNTIME_API_URL,
            token=settings.RUNTIME_SERVICE_TOKEN,
            instance_id=settings.RUNTIME_INSTANCE_ID or default_instance_id(),
            capabilities=list(settings.RUNTIME_CAPABILITIES) or prompts.job_types(),
            concurrency=settings.RUNTIME_CONCURRENCY,
            heartbeat_seconds=settings.RUNTIME_HEARTBEAT_SECONDS,
            poll_interval_ms=settings.RUNTIME_POLL_INTERVAL_MS,
        )
        return replace(config, **{key: value for key, value in overrides.items() if value is not None})


def default_instance_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"
