"""How an attempt ends early: a failure to report, or a job that is no longer ours."""

from __future__ import annotations

from config.errors import RuntimeErrorCode


class Stop(Exception):
    """End the attempt and report this failure code."""

    def __init__(self, code: RuntimeErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Abandon(Exception):
    """The job is no longer ours (lost lease, cancelled elsewhere): drop it quietly."""
