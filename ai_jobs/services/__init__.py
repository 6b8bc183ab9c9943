"""Every write to jobs, results, snapshots and invocation logs.

``creation``: ``POST /ai/jobs``; ``jobs``: operating on jobs; ``protocol``: the runtime
protocol (what a runtime does to the job it holds); ``invocation_logs``: its model
calls' telemetry, each counted; ``reaper``: returning lapsed work;
``operations``: what operators watch. Status changes go through ``ai_jobs.transitions``.
"""

from ai_jobs.services.creation import SubmittedJob, job_submit
from ai_jobs.services.invocation_logs import invocation_logs_record
from ai_jobs.services.jobs import ai_settings_update, job_cancel, job_create, job_rerun, jobs_cancel
from ai_jobs.services.operations import queue_sample_record, runtime_seen
from ai_jobs.services.protocol import (
    FailOutcome,
    ResolvedCredential,
    StartedJob,
    SubmittedResult,
    job_claim,
    job_claim_started,
    job_credential,
    job_fail,
    job_heartbeat,
    job_lock,
    job_snapshot,
    result_persist,
    result_submit,
    retry_delay,
)
from ai_jobs.services.reaper import jobs_reap

__all__ = [
    "FailOutcome",
    "ResolvedCredential",
    "StartedJob",
    "SubmittedJob",
    "SubmittedResult",
    "ai_settings_update",
    "invocation_logs_record",
    "job_cancel",
    "job_claim",
    "job_claim_started",
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
    "result_persist",
    "result_submit",
    "retry_delay",
    "runtime_seen",
]
