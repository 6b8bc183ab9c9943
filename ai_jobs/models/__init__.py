"""The job and what hangs off it (``jobs``), and what results become (``records``)."""

from ai_jobs.models.jobs import (
    ACTIVE_STATUSES,
    FINAL_STATUSES,
    AiInvocationLog,
    AiJobSnapshot,
    AiRuntimeJob,
    AiRuntimeResult,
    ApiKeyMode,
    JobStatus,
    JobType,
    TargetType,
)

__all__ = [
    "ACTIVE_STATUSES",
    "FINAL_STATUSES",
    "AiInvocationLog",
    "AiJobSnapshot",
    "AiRuntimeJob",
    "AiRuntimeResult",
    "ApiKeyMode",
    "JobStatus",
    "JobType",
    "TargetType",
]
