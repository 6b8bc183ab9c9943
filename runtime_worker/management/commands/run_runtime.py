"""Run the reference Runtime until SIGTERM / SIGINT (a second one skips the grace)."""

from __future__ import annotations

import logging
import os
import signal
import sys
from types import FrameType

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime_worker import redact
from runtime_worker.config import RuntimeConfig
from runtime_worker.runner import Runtime


class Command(BaseCommand):
    help = "Claim AI jobs over the internal API and run them against the model (the reference Runtime)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--api-url", help="default RUNTIME_API_URL")
        parser.add_argument("--instance-id", help="default RUNTIME_INSTANCE_ID, else host-pid")
        parser.add_argument("--concurrency", type=int, help="job slots; default RUNTIME_CONCURRENCY")
        parser.add_argument("--capabilities", help="comma-separated job types; default RUNTIME_CAPABILITIES, else all")
        parser.add_argument("--heartbeat-seconds", type=float, help="default RUNTIME_HEARTBEAT_SECONDS")
        parser.add_argument("--poll-interval-ms", type=int, help="default RUNTIME_POLL_INTERVAL_MS")
        parser.add_argument("--grace-seconds", type=float, default=30.0, help="on SIGTERM, time left to running jobs")

    def handle(self, *args: object, **options: object) -> None:
        capabilities = options.get("capabilities")
        config = RuntimeConfig.from_settings(
            api_url=options.get("api_url"),
            instance_id=options.get("instance_id"),
            concurrency=options.get("concurrency"),
            capabilities=[c.strip() for c in str(capabilities).split(",") if c.strip()] if capabilities else None,
            heartbeat_seconds=options.get("heartbeat_seconds"),
            poll_interval_ms=options.get("poll_interval_ms"),
            grace_seconds=options.get("grace_seconds"),
        )
        if not config.token:
            raise CommandError("RUNTIME_SERVICE_TOKEN is not set: the internal API would refuse every call")
        if not config.capabilities:
            raise CommandError("No capabilities: set RUNTIME_CAPABILITIES or add prompt templates")
        redact.register_secret(config.token)
        redact.install()
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
        # Model calls abandoned mid-flight live on daemon threads; do not wait for them.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
