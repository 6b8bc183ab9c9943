"""The job's counters, recorded once the transaction that made the
change commits: a rolled-back result or failure counts nothing."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from config.observability.metrics import JOBS_FINISHED, MODEL_TOKENS


def jobs_finished(*, status: str, job_types: Iterable[str], error_code: str | None = None) -> None:
    """Jobs that reached ``status`` (succeeded, failed, cancelled), one job type each."""
    job_types = list(job_types)
    if job_types:
        transaction.on_commit(lambda: _count_finished(status, job_types, error_code or ""))


def _count_finished(status: str, job_types: list[str], error_code: str) -> None:
    for job_type in set(job_types):
        JOBS_FINISHED.inc(status, job_type, error_code, amount=job_types.count(job_type))


def tokens_reported(*, api_key_mode: str, tokens: int) -> None:
    if tokens > 0:
        transaction.on_commit(lambda: MODEL_TOKENS.inc(api_key_mode, amount=tokens))
