"""Every write to jobs, results, snapshots and invocation logs.

``creation``: ``POST /ai/jobs``; ``jobs``: operating on jobs; the runtime protocol by
phase: ``claims`` (taking and keeping a lease), ``handout`` (the snapshot and the model
key, to the lease's holder), ``finish`` (the result or the failure); ``invocation_logs``: its model
calls' telemetry, each counted; ``reaper``: returning lapsed work;
``operations``: what operators watch; ``pauses``: pausing job types;
``bulk``: operators' reruns and cancels by filter. Status changes go through ``ai_jobs.transitions``.
"""

from ai_jobs.services.bulk import (
    BULK_OPERATION_PERMISSION,
    bulk_operation_run,
    bulk_operation_start,
    bulk_operations_stalled,
    job_filter_clean,
    operation_jobs,
)
from ai_jobs.services.claims import StartedJob, job_claim, job_claim_started, job_heartbeat, job_lock
from ai_jobs.services.creation import SubmittedJob, job_submit
from ai_jobs.services.finish import FailOutcome, SubmittedResult, job_fail, result_persist, result_submit, retry_delay
from ai_jobs.services.handout import ResolvedCredential, job_credential, job_snapshot
from ai_jobs.services.invocation_logs import invocation_logs_record
from ai_jobs.services.jobs import Reruns, ai_settings_update, job_cancel, job_create, job_rerun, jobs_cancel, jobs_rerun
from ai_jobs.services.operations import queue_sample_record, runtime_seen
from ai_jobs.services.pauses import job_types_pause, job_types_resume
from ai_jobs.services.reaper import jobs_reap

__all__ = [
    "BULK_OPERATION_PERMISSION",
    "FailOutcome",
    "Reruns",
    "ResolvedCredential",
    "StartedJob",
    "SubmittedJob",
    "SubmittedResult",
    "ai_settings_update",
    "bulk_operation_run",
    "bulk_operation_start",
    "bulk_operations_stalled",
    "invocation_logs_record",
    "job_cancel",
    "job_claim",
    "job_claim_started",
    "job_create",
    "job_credential",
    "job_fail",
    "job_filter_clean",
    "job_heartbeat",
    "job_lock",
    "job_rerun",
    "job_snapshot",
    "job_submit",
    "job_types_pause",
    "job_types_resume",
    "jobs_cancel",
    "jobs_reap",
    "jobs_rerun",
    "operation_jobs",
    "queue_sample_record",
    "result_persist",
    "result_submit",
    "retry_delay",
    "runtime_seen",
]
