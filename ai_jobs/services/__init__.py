"""Every write to jobs, results, snapshots and invocation logs.

``jobs``: creating and operating on jobs; ``runtime``: the runtime protocol;
``reaper``: returning lapsed work. Status changes go through ``ai_jobs.transitions``.
"""

from ai_jobs.services.creation import SubmittedJob, job_submit
from ai_jobs.services.jobs import ai_settings_update, job_cancel, job_create, job_rerun, jobs_cancel
from ai_jobs.services.operations import queue_sample_record, runtime_seen
from ai_jobs.services.reaper import jobs_reap
from ai_jobs.services.runtime import (
    FailOutcome,
    ResolvedCredential,
    SubmittedResult,
    invocation_logs_record,
    job_claim,
    job_credential,
    job_fail,
    job_heartbeat,
    job_lock,
    job_snapshot,
    result_submit,
    retry_delay,
)

__all__ = [
    "FailOutcome",
    "ResolvedCredential",
    "SubmittedJob",
    "SubmittedResult",
    "ai_settings_update",
    "invocation_logs_record",
    "job_cancel",
    "job_claim",
    "job_create",
    "job_credential",
    "job_fail",
    "job_heartbeat",
    "job_lock",
    "job_rerun",
    "job_snapshot",
    "job_submit",
    "jobs_cancel",
    "jobs_reap",
    "queue_sample_record",
    "result_submit",
    "retry_delay",
    "runtime_seen",
]
