"""Pausing and resuming job types (contract section 12): a paused type's jobs are
still created and wait ``pending``; claim, poll and lock pass over them
(``ai_jobs.pauses``); jobs already running finish."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from ai_jobs import job_types, pauses
from ai_jobs.models import JobTypePause
from config.errors import DomainError, ErrorCode


def _known(names: Sequence[str]) -> list[str]:
    unknown = [name for name in names if job_types.get(name) is None]
    if unknown or not names:
        raise DomainError(
            ErrorCode.VALIDATION_ERROR,
            f"Not a job type: {', '.join(unknown)}" if unknown else "Name at least one job type",
            fields={"jobType": [f"One of {', '.join(job_types.names())}."]},
        )
    return list(dict.fromkeys(names))


def job_types_pause(*, names: Sequence[str], by: str, reason: str = "") -> list[str]:
    """Pause the named types; the ones newly paused come back (pausing a paused type
    again keeps its first moment and author)."""
    names = _known(names)
    with transaction.atomic():
        already = set(JobTypePause.objects.filter(job_type__in=names).values_list("job_type", flat=True))
        now = timezone.now()
        JobTypePause.objects.bulk_create(
            [JobTypePause(job_type=name, paused_at=now, paused_by=by[:150], reason=reason) for name in names],
            ignore_conflicts=True,
        )
    pauses.forget()
    return [name for name in names if name not in already]


def job_types_resume(*, names: Sequence[str]) -> list[str]:
    """Resume the named types; the ones that were paused come back."""
    names = _known(names)
    with transaction.atomic():
        resumed = set(JobTypePause.objects.filter(job_type__in=names).values_list("job_type", flat=True))
        JobTypePause.objects.filter(job_type__in=names).delete()
    pauses.forget()
    return [name for name in names if name in resumed]
