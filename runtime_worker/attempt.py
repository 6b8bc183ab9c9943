"""What the steps of an attempt (``runtime_worker.inputs``, ``runtime_worker.delivery``)
see of it, and how it ends early: a failure to report, or a job that is no longer ours.
``runtime_worker.job.JobRun`` is the attempt."""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

from protocol.errors import RuntimeErrorCode
from runtime_worker.api import InternalApi, Job
from runtime_worker.config import RuntimeConfig


class Stop(Exception):
    """End the attempt and report this failure code."""

    def __init__(self, code: RuntimeErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Abandon(Exception):
    """The job is no longer ours (lost lease, cancelled elsewhere): drop it quietly.
    ``code``: the server's answer that said so, when there was one."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class Runtime(Protocol):
    config: RuntimeConfig
    hard_stop_at: float | None  # past the grace period: when the last reports must be in


class Attempt(Protocol):
    runtime: Runtime
    api: InternalApi
    job: Job
    log: logging.LoggerAdapter[Any]
    wake: threading.Event
    settled: bool  # the server has our result or failure
    delivering: bool  # sending it: the answer to that call decides, not a heartbeat

    def checkpoint(self, *, holding_answer: bool = False) -> None: ...
