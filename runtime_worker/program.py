"""The reference runtime as a program of its own: ``python -m runtime_worker``.

It imports no Django and no server app (DESIGN rule 13): its settings are the
``RUNTIME_*`` variables of its environment (``runtime_worker.config``), what it shares
with the server is the framework-free ``protocol`` package, and it installs from its own
hash-pinned ``runtime_worker/requirements.txt``. So a runtime machine needs none of the
server's secrets: the model key of a job comes through the ``credential`` call.
``manage.py run_runtime`` (``make run``) is a thin wrapper around ``main``.

Runs until SIGTERM / SIGINT: running jobs get ``--grace-seconds`` to finish; a second
signal skips the grace."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from runtime_worker import redact
from runtime_worker.config import RuntimeConfig, RuntimeConfigError
from runtime_worker.runner import Runtime


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m runtime_worker",
        description="Claim AI jobs over the internal API and run them against the model (the reference runtime).",
    )
    parser.add_argument("--api-url", help="default RUNTIME_API_URL")
    parser.add_argument("--instance-id", help="default RUNTIME_INSTANCE_ID, else host-pid")
    parser.add_argument("--concurrency", type=int, help="job slots; default RUNTIME_CONCURRENCY")
    parser.add_argument("--capabilities", help="comma-separated job types; default RUNTIME_CAPABILITIES, else all")
    parser.add_argument("--heartbeat-seconds", type=float, help="default RUNTIME_HEARTBEAT_SECONDS")
    parser.add_argument("--poll-interval-ms", type=int, help="default RUNTIME_POLL_INTERVAL_MS")
    parser.add_argument("--grace-seconds", type=float, default=30.0, help="on SIGTERM, time left to running jobs")
    return parser


def config_from(arguments: argparse.Namespace) -> RuntimeConfig:
    capabilities = arguments.capabilities
    return RuntimeConfig.from_env(
        api_url=arguments.api_url,
        instance_id=arguments.instance_id,
        concurrency=arguments.concurrency,
        capabilities=[c.strip() for c in capabilities.split(",") if c.strip()] if capabilities else None,
        heartbeat_seconds=arguments.heartbeat_seconds,
        poll_interval_ms=arguments.poll_interval_ms,
        grace_seconds=arguments.grace_seconds,
    )


class Refused(SystemExit):
    """The runtime does not start: the message says which setting to fix."""


def checked(config: RuntimeConfig) -> RuntimeConfig:
    if not config.token:
        raise Refused("RUNTIME_SERVICE_TOKEN is not set: the internal API would refuse every call")
    if not config.capabilities:
        raise Refused("No capabilities: set RUNTIME_CAPABILITIES or add prompt templates")
    return config


def run(config: RuntimeConfig, *, configure_logging: bool = True) -> None:
    """Run until a signal stops it, then leave the process (model calls abandoned
    mid-flight live on daemon threads: nothing waits for them)."""
    redact.register_secret(config.token)
    redact.install()
    if configure_logging:
        logging.basicConfig(
            level=logging.WARNING,
            format="%(asctime)s %(levelname)s %(name)s %(message)s",
            stream=sys.stderr,
        )
    logging.getLogger("runtime_worker").setLevel(logging.INFO)
    runtime = Runtime(config)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if runtime.stopping:
            runtime.abort_now()
        else:
            runtime.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    runtime.run()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: Sequence[str] | None = None) -> None:
    arguments = parser().parse_args(argv)
    try:
        config = checked(config_from(arguments))
    except RuntimeConfigError as error:
        raise Refused(str(error)) from None
    run(config)
