"""The ai_jobs app's hot-path statements, each written out whole with named parameters.

``config.sql.fetch``/``execute`` run them with a dict. A statement whose comment says
"PostgreSQL's alone" uses what SQLite does not speak (arrays, ``SKIP LOCKED``, row
locks); the embedded default (SQLite) does the same with the ORM or with a statement
both speak, named where it is run. The others run on both.

Parameters said the same way everywhere: ``now``, the moment of the call, and
``now_ms``, the same in milliseconds since the epoch; ``lock_until``, the end of the
lease it gives; ``enabled_by_default``, whether a user without a settings row has AI
analysis on (``AI_ANALYSIS_ENABLED_BY_DEFAULT``); ``trial``, whether the caller holds
the half-open breaker's row and counted its trial jobs: it takes platform-key jobs
only, whatever the breaker says. Every other job is handed out on the platform key
only while the breaker is closed (no row yet: closed).

A job's consent holds while its cancel was not requested and its user's AI analysis
is on now (no settings row: the default); it holds for the job's whole life.
"""

# --- the job state machine (ai_jobs.transitions) --------------------------------------------------

# pending → locked (``status`` 'locked', ``started_at`` and ``started_ms`` NULL: an attempt
# not started has no deadline yet, its ``timeout_seconds`` count from its start) or straight
# to running (``status`` 'running', ``started_at`` now and ``started_ms`` the same: the lock
# is the attempt's start too), for one named job that is due. Every column comes back, with
# the user's public id last. ``claim_id``: the claim's ``claimId``, or NULL.
LOCK = """UPDATE ai_runtime_job
SET status = %(status)s, locked_by = %(instance_id)s, locked_at = %(now)s, lock_until = %(lock_until)s,
    deadline_ms = CAST(%(started_ms)s AS bigint) + timeout_seconds * 1000, attempt_no = attempt_no + 1,
    claim_id = %(claim_id)s,
    started_at = COALESCE(%(started_at)s, started_at), updated_at = %(now)s
WHERE id = %(job_id)s AND status = 'pending' AND available_at <= %(now)s
    AND (lock_until IS NULL OR lock_until < %(now)s)
    AND CASE WHEN %(trial)s THEN api_key_mode = 'platform_key'
        ELSE api_key_mode <> 'platform_key' OR NOT EXISTS (
            SELECT 1 FROM quota_platform_circuit_breaker b WHERE b.id = 1 AND b.state <> 'closed') END
RETURNING id, user_id, job_type, target_type, target_id, snapshot_id, status, priority, idempotency_key,
    api_key_mode, credential_id, model_provider, model_name, prompt_version, output_schema_version, attempt_no,
    retried_from_job_id, rerun_as_id, params, locked_by, locked_at, lock_until, claim_id, deadline_ms,
    cancel_requested,
    started_at, finished_at, retry_count, max_retry_count, timeout_seconds, quota_date, available_at,
    error_code, error_message, created_at, updated_at,
    (SELECT a.public_id FROM accounts_account a WHERE a.user_id = ai_runtime_job.user_id)"""

# LOCK for the first ``limit`` due jobs of ``job_types``, in ``(priority, created_at, id)``
# order. ``SKIP LOCKED``: runtimes claiming at once each skip the rows another is taking.
# The pick is a materialized CTE, so its LIMIT is applied once (``id IN (SELECT ... LIMIT)``
# may be re-planned as a join that locks more rows than asked for), and the update finds its
# rows by ``= ANY(ARRAY(...))``, whose generic plan (a prepared statement's) still goes by
# primary key where ``IN (SELECT ...)`` becomes a hash join over every pending row.
# The columns a claimed job is rendered with and sorted by, the public id last.
# PostgreSQL's alone: SQLite picks with the ORM and runs LOCK on each job picked.
CLAIM = """WITH picked AS MATERIALIZED (
    SELECT id FROM ai_runtime_job
    WHERE status = 'pending' AND available_at <= %(now)s AND job_type = ANY(%(job_types)s)
        AND CASE WHEN %(trial)s THEN api_key_mode = 'platform_key'
            ELSE api_key_mode <> 'platform_key' OR NOT EXISTS (
                SELECT 1 FROM quota_platform_circuit_breaker b WHERE b.id = 1 AND b.state <> 'closed') END
    ORDER BY priority, created_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
UPDATE ai_runtime_job
SET status = %(status)s, locked_by = %(instance_id)s, locked_at = %(now)s, lock_until = %(lock_until)s,
    deadline_ms = CAST(%(started_ms)s AS bigint) + timeout_seconds * 1000, attempt_no = attempt_no + 1,
    claim_id = %(claim_id)s,
    started_at = COALESCE(%(started_at)s, started_at), updated_at = %(now)s
WHERE status = 'pending' AND id = ANY(ARRAY(SELECT id FROM picked))
RETURNING id, user_id, job_type, target_type, target_id, status, priority, api_key_mode, credential_id,
    model_provider, model_name, prompt_version, output_schema_version, attempt_no, params, lock_until,
    retry_count, max_retry_count, timeout_seconds, created_at,
    (SELECT a.public_id FROM accounts_account a WHERE a.user_id = ai_runtime_job.user_id)"""

# The statements of the lease's holder below act only on its live attempt: the lease has not
# lapsed and the deadline (``timeout_seconds`` from the attempt's start) has not passed. An
# attempt is over the moment either happens, not when the reaper next runs.

# The lease extended; the attempt's first heartbeat moves locked → running, its start. A
# heartbeat shows the claim's answer arrived: a claim sent again no longer answers the job.
HEARTBEAT = """UPDATE ai_runtime_job
SET lock_until = %(lock_until)s, status = 'running', claim_id = NULL,
    started_at = CASE WHEN status = 'locked' THEN %(now)s ELSE started_at END,
    deadline_ms = CASE WHEN status = 'locked' THEN %(now_ms)s + timeout_seconds * 1000 ELSE deadline_ms END,
    updated_at = %(now)s
WHERE id = %(job_id)s AND status IN ('locked', 'running') AND locked_by = %(instance_id)s
    AND lock_until >= %(now)s AND (deadline_ms IS NULL OR deadline_ms >= %(now_ms)s)
RETURNING cancel_requested"""

# locked → running at the attempt's first snapshot or credential call, which show its
# runtime at work as a heartbeat would; nothing when a heartbeat started it meanwhile.
START = """UPDATE ai_runtime_job
SET status = 'running', started_at = %(now)s, deadline_ms = %(now_ms)s + timeout_seconds * 1000,
    claim_id = NULL, updated_at = %(now)s
WHERE id = %(job_id)s AND status = 'locked' AND locked_by = %(instance_id)s AND lock_until >= %(now)s
    AND attempt_no = %(attempt_no)s"""

# locked/running → succeeded, by the holder of this very attempt, while consent holds; a
# result straight from locked is the attempt's start too. The columns a result is stored,
# published, noticed and charged with, then whether the user has a device that takes pushes
# (a learner with none costs the result no push statement), the public id last.
SUCCEED = """UPDATE ai_runtime_job
SET status = 'succeeded', finished_at = %(now)s, lock_until = NULL,
    started_at = CASE WHEN status = 'locked' THEN %(now)s ELSE started_at END,
    error_code = NULL, error_message = NULL, updated_at = %(now)s
WHERE id = %(job_id)s AND status IN ('locked', 'running') AND locked_by = %(instance_id)s
    AND lock_until >= %(now)s AND (deadline_ms IS NULL OR deadline_ms >= %(now_ms)s)
    AND attempt_no = %(attempt_no)s
    AND cancel_requested = FALSE AND COALESCE((SELECT s.ai_analysis_enabled FROM quota_user_ai_settings s
        WHERE s.user_id = ai_runtime_job.user_id), %(enabled_by_default)s)
RETURNING id, user_id, job_type, target_type, target_id, status, priority, api_key_mode, credential_id,
    model_provider, model_name, prompt_version, output_schema_version, attempt_no, params, quota_date,
    created_at, EXISTS (SELECT 1 FROM delivery_device d WHERE d.user_id = ai_runtime_job.user_id AND d.enabled),
    (SELECT a.public_id FROM accounts_account a WHERE a.user_id = ai_runtime_job.user_id)"""

# locked/running → cancelled, by the holder (of ``attempt_no``, unless it is NULL), once
# consent no longer holds.
CANCEL_WITHDRAWN = """UPDATE ai_runtime_job
SET status = 'cancelled', cancel_requested = TRUE, finished_at = %(now)s, lock_until = NULL, deadline_ms = NULL,
    error_code = 'JOB_CANCELLED',
    error_message = 'Cancelled: the user withdrew consent (cancel, or AI analysis turned off) while a runtime held the job',
    updated_at = %(now)s
WHERE id = %(job_id)s AND status IN ('locked', 'running') AND locked_by = %(instance_id)s
    AND lock_until >= %(now)s AND (deadline_ms IS NULL OR deadline_ms >= %(now_ms)s)
    AND (CAST(%(attempt_no)s AS integer) IS NULL OR attempt_no = %(attempt_no)s)
    AND NOT (cancel_requested = FALSE AND COALESCE((SELECT s.ai_analysis_enabled FROM quota_user_ai_settings s
        WHERE s.user_id = ai_runtime_job.user_id), %(enabled_by_default)s))
RETURNING job_type"""

# The holder of this attempt reports a failure. The retry policy, decided once as the
# attempt's ``outcome``: a job whose cancel was requested, or that reports ``cancelled``,
# ends cancelled; a ``retryable`` failure with retries left goes back to pending, available
# again at ``retry_at``, with one more retry counted; any other ends failed.
FAIL = """UPDATE ai_runtime_job
SET (status, retry_count, available_at, finished_at, locked_by) = (
        SELECT outcome,
            CASE WHEN outcome = 'pending' THEN retry_count + 1 ELSE retry_count END,
            CASE WHEN outcome = 'pending' THEN %(retry_at)s ELSE available_at END,
            CASE WHEN outcome = 'pending' THEN NULL ELSE %(now)s END,
            CASE WHEN outcome = 'pending' THEN NULL ELSE locked_by END
        FROM (SELECT CASE WHEN cancel_requested OR %(cancelled)s THEN 'cancelled'
            WHEN %(retryable)s AND retry_count < max_retry_count THEN 'pending' ELSE 'failed' END AS outcome) policy),
    lock_until = NULL, deadline_ms = NULL, error_code = %(error_code)s, error_message = %(error_message)s,
    updated_at = %(now)s
WHERE id = %(job_id)s AND status IN ('locked', 'running') AND locked_by = %(instance_id)s
    AND lock_until >= %(now)s AND (deadline_ms IS NULL OR deadline_ms >= %(now_ms)s) AND attempt_no = %(attempt_no)s
RETURNING status, retry_count, api_key_mode, job_type, user_id, target_type, target_id"""

# --- the reaper (ai_jobs.services.reaper) -----------------------------------------------------------
# A batch is the ids after the cursor ``after_id`` up to ``last_id``, the last one picked.
# The pick locks nothing: the updates lock each row and check its condition again, so a
# job that heartbeat, finished or was reaped by another run meanwhile stays where it is.

# Leased jobs whose lease lapsed or whose attempt timed out, and jobs left expired.
LAPSED_IDS = """SELECT id FROM ai_runtime_job
WHERE status IN ('locked', 'running', 'expired') AND id > %(after_id)s
    AND (status = 'expired' OR lock_until < %(now)s OR deadline_ms < %(now_ms)s)
ORDER BY id LIMIT %(limit)s"""

# locked/running → expired, for the batch's jobs whose lease lapsed or attempt timed out.
EXPIRE = """UPDATE ai_runtime_job SET status = 'expired', lock_until = NULL, updated_at = %(now)s
WHERE status IN ('locked', 'running') AND id > %(after_id)s AND id <= %(last_id)s
    AND (lock_until < %(now)s OR deadline_ms < %(now_ms)s)
RETURNING id"""

# expired → pending, by FAIL's retry policy for a retryable failure (its outcome decided
# once): a job whose cancel was requested ends cancelled (JOB_CANCELLED), one with retries
# left goes back to pending at once, any other ends failed (JOB_TIMEOUT).
SETTLE_EXPIRED = """UPDATE ai_runtime_job
SET (status, retry_count, available_at, finished_at, locked_by, error_code, error_message) = (
        SELECT outcome,
            CASE WHEN outcome = 'pending' THEN retry_count + 1 ELSE retry_count END,
            CASE WHEN outcome = 'pending' THEN %(now)s ELSE available_at END,
            CASE WHEN outcome = 'pending' THEN NULL ELSE %(now)s END,
            CASE WHEN outcome = 'pending' THEN NULL ELSE locked_by END,
            CASE WHEN outcome = 'cancelled' THEN 'JOB_CANCELLED' ELSE 'JOB_TIMEOUT' END,
            CASE WHEN outcome = 'cancelled' THEN 'Cancelled; the lease lapsed before the runtime confirmed'
                ELSE 'The lease lapsed or the attempt ran past timeoutSeconds' END
        FROM (SELECT CASE WHEN cancel_requested THEN 'cancelled'
            WHEN retry_count < max_retry_count THEN 'pending' ELSE 'failed' END AS outcome) policy),
    deadline_ms = NULL, updated_at = %(now)s
WHERE status = 'expired' AND id > %(after_id)s AND id <= %(last_id)s
RETURNING id, status, job_type, user_id, target_type, target_id, error_code"""

# --- what the holder of a lease is given (ai_jobs.leases) ---------------------------------------------
# The job's columns the checks need, the user's public id, whether consent holds; with
# ``snapshot``, its snapshot's columns and ``data`` as the stored JSON text (never decoded
# and encoded again) and the user's timezone, for one built on the way; with
# ``credential``, the columns of its credential that decrypt the user's key; last, whether the
# job is still untouched since its claim (a claim sent again would answer it).

# The job, if ``instance_id`` holds its live attempt (``status``: locked, when this call starts it).
LEASED_JOB = """SELECT j.id, j.user_id, j.target_type, j.target_id, j.api_key_mode, j.model_provider, j.model_name,
    j.credential_id, j.attempt_no, j.status,
    (SELECT a.public_id FROM accounts_account a WHERE a.user_id = j.user_id),
    j.cancel_requested = FALSE AND COALESCE((SELECT s.ai_analysis_enabled FROM quota_user_ai_settings s
        WHERE s.user_id = j.user_id), %(enabled_by_default)s),
    snap.id, snap.target_type, snap.target_id, snap.schema_version, snap.created_at, snap.expires_at,
    CAST(snap.payload AS text),
    CASE WHEN %(snapshot)s THEN (SELECT s.timezone FROM quota_user_ai_settings s WHERE s.user_id = j.user_id) END,
    cred.id, cred.provider, cred.base_url, cred.key_id, cred.nonce, cred.ciphertext, j.claim_id IS NOT NULL
FROM ai_runtime_job j
LEFT JOIN ai_job_snapshot snap ON %(snapshot)s AND snap.id = j.snapshot_id
LEFT JOIN ai_model_credential cred ON %(credential)s AND cred.id = j.credential_id
    AND cred.user_id = j.user_id AND cred.deleted_at IS NULL
WHERE j.id = %(job_id)s AND j.status IN ('locked', 'running') AND j.locked_by = %(instance_id)s
    AND j.lock_until >= %(now)s AND (j.deadline_ms IS NULL OR j.deadline_ms >= %(now_ms)s)"""

# LEASED_JOB for the jobs of ``job_ids``, just claimed by the caller.
# PostgreSQL's alone: SQLite runs LEASED_JOB for each.
CLAIMED_JOBS = """SELECT j.id, j.user_id, j.target_type, j.target_id, j.api_key_mode, j.model_provider, j.model_name,
    j.credential_id, j.attempt_no, j.status,
    (SELECT a.public_id FROM accounts_account a WHERE a.user_id = j.user_id),
    j.cancel_requested = FALSE AND COALESCE((SELECT s.ai_analysis_enabled FROM quota_user_ai_settings s
        WHERE s.user_id = j.user_id), %(enabled_by_default)s),
    snap.id, snap.target_type, snap.target_id, snap.schema_version, snap.created_at, snap.expires_at,
    CAST(snap.payload AS text),
    CASE WHEN %(snapshot)s THEN (SELECT s.timezone FROM quota_user_ai_settings s WHERE s.user_id = j.user_id) END,
    cred.id, cred.provider, cred.base_url, cred.key_id, cred.nonce, cred.ciphertext, j.claim_id IS NOT NULL
FROM ai_runtime_job j
LEFT JOIN ai_job_snapshot snap ON %(snapshot)s AND snap.id = j.snapshot_id
LEFT JOIN ai_model_credential cred ON %(credential)s AND cred.id = j.credential_id
    AND cred.user_id = j.user_id AND cred.deleted_at IS NULL
WHERE j.id = ANY(%(job_ids)s)"""

# A snapshot or credential call of a job its claim started (``running``) shows the claim's
# answer arrived: a claim sent again no longer answers the job.
UNCLAIM = "UPDATE ai_runtime_job SET claim_id = NULL WHERE id = %(job_id)s AND claim_id IS NOT NULL"

# The jobs the claim ``claim_id`` of ``instance_id`` took that it still holds, untouched since
# (their ``claim_id`` is still set), with their leases live: what that claim, sent again
# because its answer was lost, answers. CLAIM's columns.
CLAIMED_AGAIN = """SELECT id, user_id, job_type, target_type, target_id, status, priority, api_key_mode, credential_id,
    model_provider, model_name, prompt_version, output_schema_version, attempt_no, params, lock_until,
    retry_count, max_retry_count, timeout_seconds, created_at,
    (SELECT a.public_id FROM accounts_account a WHERE a.user_id = ai_runtime_job.user_id)
FROM ai_runtime_job
WHERE claim_id = %(claim_id)s AND locked_by = %(instance_id)s AND status IN ('locked', 'running')
    AND lock_until >= %(now)s AND (deadline_ms IS NULL OR deadline_ms >= %(now_ms)s)"""

# The snapshot built for a job that had none (or an expired one).
SET_SNAPSHOT = "UPDATE ai_runtime_job SET snapshot_id = %(snapshot_id)s, updated_at = %(now)s WHERE id = %(job_id)s"

# A new snapshot; ``payload`` is the JSON text the database assembled, stored as it is.
INSERT_SNAPSHOT = """INSERT INTO ai_job_snapshot
    (id, user_id, target_type, target_id, schema_version, created_at, expires_at, payload)
VALUES (%(id)s, %(user_id)s, %(target_type)s, %(target_id)s, %(schema_version)s, %(created_at)s, %(expires_at)s,
    %(payload)s)"""

# --- creating jobs (ai_jobs.services.creation) ----------------------------------------------------------

# Whether the user already made this job under this idempotency key.
IDEMPOTENT_PROBE = """SELECT id FROM ai_runtime_job
WHERE user_id = %(user_id)s AND job_type = %(job_type)s AND target_type = %(target_type)s
    AND target_id = %(target_id)s AND idempotency_key = %(key)s"""

# --- what the operators' screens need (ai_jobs.services.operations) --------------------------------------

# A runtime instance called (``heartbeat_at``: a heartbeat; NULL keeps the last one).
RUNTIME_SEEN = """INSERT INTO ai_runtime_instance (instance_id, first_seen_at, last_seen_at, last_heartbeat_at)
VALUES (%(instance_id)s, %(now)s, %(now)s, %(heartbeat_at)s)
ON CONFLICT (instance_id) DO UPDATE SET last_seen_at = EXCLUDED.last_seen_at,
    last_heartbeat_at = COALESCE(EXCLUDED.last_heartbeat_at, ai_runtime_instance.last_heartbeat_at)"""

# --- operators' reruns (ai_jobs.transitions.record_reruns) -----------------------------------------------

# Each failed job of ``job_ids`` named as rerun by the job of ``rerun_ids`` at the same place,
# once: a job already rerun matches no row. PostgreSQL's alone: SQLite names them with the ORM.
RECORD_RERUNS = """UPDATE ai_runtime_job j SET rerun_as_id = v.rerun_id, updated_at = %(now)s
FROM unnest(CAST(%(job_ids)s AS text[]), CAST(%(rerun_ids)s AS text[])) AS v (id, rerun_id)
WHERE j.id = v.id AND j.status = 'failed' AND j.rerun_as_id IS NULL
RETURNING j.id"""

# --- invocation logs (ai_jobs.services.invocation_logs) ----------------------------------------------------

# A runtime's logs, one array per column, joined to their job, which checks the job and
# each log's attempt as they go in; a log sent again (job, attempt, request id) is no row.
# What went in comes back, for the calls that did not end in the result to count.
# PostgreSQL's alone: SQLite reads the job first and inserts with config.sql.insert_rows.
RECORD_LOGS = """INSERT INTO ai_invocation_log (job_id, attempt_no, runtime_instance_id, provider, model_name,
    request_id, started_at, latency_ms, http_status, prompt_tokens, completion_tokens, total_tokens, cost_cents,
    error_code, created_at)
SELECT j.id, v.attempt_no, %(instance_id)s, v.provider, v.model_name, v.request_id, v.started_at, v.latency_ms,
    v.http_status, v.prompt_tokens, v.completion_tokens, v.total_tokens, v.cost_cents, v.error_code, %(now)s
FROM unnest(CAST(%(attempt_nos)s AS integer[]), CAST(%(providers)s AS text[]), CAST(%(model_names)s AS text[]),
    CAST(%(request_ids)s AS text[]), CAST(%(started_ats)s AS timestamptz[]), CAST(%(latencies_ms)s AS integer[]),
    CAST(%(http_statuses)s AS integer[]), CAST(%(prompt_tokens)s AS integer[]),
    CAST(%(completion_tokens)s AS integer[]), CAST(%(total_tokens)s AS integer[]),
    CAST(%(costs_cents)s AS numeric[]), CAST(%(error_codes)s AS text[]))
    AS v (attempt_no, provider, model_name, request_id, started_at, latency_ms, http_status, prompt_tokens,
        completion_tokens, total_tokens, cost_cents, error_code)
JOIN ai_runtime_job j ON j.id = %(job_id)s AND v.attempt_no BETWEEN 1 AND j.attempt_no
ON CONFLICT DO NOTHING
RETURNING total_tokens, cost_cents, error_code"""

# --- what a result's outputs check (ai_jobs.outputs) ----------------------------------------------------
# Nothing the model wrote is trusted as a reference: these say which of the ids it named
# are the user's. PostgreSQL's alone: SQLite asks the ORM the same.

# Which of ``ids`` are the user's knowledge points.
OWN_POINTS = "SELECT id FROM learning_knowledge_point WHERE user_id = %(user_id)s AND id = ANY(%(ids)s)"

# Which of the ids named as a material, a knowledge point or a knowledge base are the user's.
OWN_TARGETS = """SELECT 'material', id FROM learning_material
WHERE user_id = %(user_id)s AND id = ANY(%(material_ids)s)
UNION ALL SELECT 'knowledge_point', id FROM learning_knowledge_point
WHERE user_id = %(user_id)s AND id = ANY(%(knowledge_point_ids)s)
UNION ALL SELECT 'knowledge_base', id FROM learning_knowledge_base
WHERE user_id = %(user_id)s AND id = ANY(%(knowledge_base_ids)s)"""

# The job's knowledge base if it is still the user's, locked until commit, so results
# publishing into it take turns and it cannot be deleted under them.
# PostgreSQL's alone (SQLite has no row locks: its writers take turns for the whole database).
KNOWLEDGE_BASE_LOCKED = """SELECT id FROM learning_knowledge_base
WHERE id = %(knowledge_base_id)s AND user_id = %(user_id)s FOR NO KEY UPDATE"""

# Who holds the normalised texts a result could not publish: an earlier job's row, or a
# writer that got there first. PostgreSQL's alone.
QUESTION_HOLDERS = """SELECT stem_key, id FROM ai_quiz_question
WHERE knowledge_base_id = %(knowledge_base_id)s AND stem_key = ANY(%(keys)s)"""
FLASHCARD_HOLDERS = """SELECT front_key, id FROM ai_flashcard
WHERE knowledge_base_id = %(knowledge_base_id)s AND front_key = ANY(%(keys)s)"""
