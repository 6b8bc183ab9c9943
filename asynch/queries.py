"""model-asynch's statements, each written out whole with named parameters, run by
``asynch.transitions`` and ``asynch.services`` through ``config.sql``.

The task's columns are named, not ``*``: a prepared statement whose result columns
changed (a migration added one) fails until its connection is replaced; they are in
the model's order, which ``config.sql.from_row`` reads them in.

Those marked "PostgreSQL's alone" take lists as arrays (``= ANY(%(task_ids)s)``), lock
with ``FOR UPDATE SKIP LOCKED`` or write in a data-modifying CTE; on the embedded
default (SQLite) ``asynch.transitions`` says the same with the ORM. The others run on
both databases as they are.
"""

# --- creating -------------------------------------------------------------------------------------

# A task queued only if its model exists, is enabled and has fewer than ``queue_limit``
# queued tasks (0: no limit), in one statement. The count and the insert are not
# serialised, so the limit is approximate.
ENQUEUE = """INSERT INTO asynch_task (id, tenant_id, creator, biz_name, model_name, request_payload, state, priority,
    enqueue_at, retry_count, attempt_no, locked_by, forward_headers_encrypted, created_at, updated_at)
SELECT %(task_id)s, %(tenant_id)s, %(creator)s, %(biz_name)s, m.model_name, %(request_payload)s, 0, 1,
    %(now)s, 0, 0, '', %(forward_headers_encrypted)s, %(now)s, %(now)s
FROM asynch_models m
WHERE m.model_name = %(model_name)s AND m.enabled AND CASE WHEN m.queue_limit = 0 THEN TRUE
    ELSE (SELECT count(*) FROM asynch_task q WHERE q.state = 0 AND q.model_name = m.model_name) < m.queue_limit END"""

# --- the worker -------------------------------------------------------------------------------------

# PostgreSQL's alone. 0 → 1 for the first ``limit`` queued tasks of ``model_names``, in
# queue order, but for the saturated (tenant, model) pairs (``saturated_tenants[i]``,
# ``saturated_models[i]``), each picked under SKIP LOCKED so no two workers take one
# task. The materialized CTE applies the LIMIT once (``id IN (SELECT ... LIMIT)`` may be
# planned as a join that takes more rows), and ``= ANY(ARRAY(...))`` finds the picked
# rows by primary key under a prepared statement's generic plan. The saturated pairs
# are a ``NOT IN`` (a hashed filter on the queue's index scan, which stops at
# ``limit``), not a ``NOT EXISTS``, which is planned as an anti-join over every queued
# row; neither list holds a NULL. The calls about to be
# made are counted in the same statement, one upsert per (day, tenant, creator, model):
# a task that already has its model's answer (``has_answer``: an upload to retry)
# makes no call and is not counted.
CLAIM = """WITH picked AS MATERIALIZED (
    SELECT id FROM asynch_task
    WHERE state = 0 AND model_name = ANY(%(model_names)s)
        AND (tenant_id, model_name) NOT IN (
            SELECT * FROM unnest(CAST(%(saturated_tenants)s AS text[]), CAST(%(saturated_models)s AS text[]))
        )
    ORDER BY priority, enqueue_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE asynch_task SET state = 1, attempt_no = attempt_no + 1, locked_by = %(worker_id)s,
        lease_until = %(lease_until)s, started_at = %(now)s, finished_at = NULL, updated_at = %(now)s
    WHERE state = 0 AND id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING id, tenant_id, creator, biz_name, model_name, request_payload, state, priority, enqueue_at, jump_at,
        retry_count, attempt_no, locked_by, lease_until, started_at, finished_at, expire_at, oss_file, http_status,
        error_message, forward_headers_encrypted, created_at, updated_at,
        EXISTS (SELECT 1 FROM asynch_task_answer a WHERE a.task_id = asynch_task.id) AS has_answer
), counted AS (
    INSERT INTO asynch_model_stat (day, tenant_id, creator, model_name, request_count, updated_at)
    SELECT %(day)s, tenant_id, creator, model_name, count(*), %(now)s FROM claimed WHERE NOT has_answer
    GROUP BY tenant_id, creator, model_name
    ON CONFLICT (day, tenant_id, creator, model_name) DO UPDATE
    SET request_count = asynch_model_stat.request_count + excluded.request_count, updated_at = excluded.updated_at
)
SELECT * FROM claimed"""

# PostgreSQL's alone. The worker still holds these running tasks: their leases renewed.
EXTEND_LEASES = """UPDATE asynch_task SET lease_until = %(lease_until)s
WHERE state = 1 AND locked_by = %(worker_id)s AND id = ANY(%(task_ids)s)"""

# PostgreSQL's alone. 1 → 2 by the holder of this attempt, in one statement: the stored
# file recorded, the forwarded headers dropped (used), and the answer kept for the
# upload deleted with them.
SUCCEED = """WITH gone AS (
    DELETE FROM asynch_task_answer WHERE task_id = %(task_id)s
        AND EXISTS (SELECT 1 FROM asynch_task WHERE id = %(task_id)s AND state = 1 AND attempt_no = %(attempt_no)s)
)
UPDATE asynch_task SET state = 2, oss_file = %(oss_file)s, http_status = %(http_status)s, finished_at = %(now)s,
    lease_until = NULL, error_message = NULL, forward_headers_encrypted = NULL, updated_at = %(now)s
WHERE id = %(task_id)s AND state = 1 AND attempt_no = %(attempt_no)s"""

# The model's answer of this attempt, kept until its file is stored; only while the
# attempt is the task's.
KEEP_ANSWER = """INSERT INTO asynch_task_answer (task_id, content, content_type, http_status, created_at)
SELECT id, %(content)s, %(content_type)s, %(http_status)s, %(now)s FROM asynch_task
WHERE id = %(task_id)s AND state = 1 AND attempt_no = %(attempt_no)s
ON CONFLICT (task_id) DO UPDATE SET content = excluded.content, content_type = excluded.content_type,
    http_status = excluded.http_status, created_at = excluded.created_at"""

# 1 → 3 by the holder of this attempt.
FAIL = """UPDATE asynch_task SET state = 3, error_message = %(error_message)s, http_status = %(http_status)s,
    finished_at = %(now)s, lease_until = NULL, updated_at = %(now)s
WHERE id = %(task_id)s AND state = 1 AND attempt_no = %(attempt_no)s"""

# PostgreSQL's alone. 1 → 0 for claimed tasks the worker could not start (no semaphore
# slot): back to their place in the queue (``enqueue_at`` and ``priority`` untouched),
# the attempt undone.
RELEASE = """UPDATE asynch_task SET state = 0, attempt_no = attempt_no - 1, locked_by = '', lease_until = NULL,
    started_at = NULL, updated_at = %(now)s
WHERE state = 1 AND locked_by = %(worker_id)s AND id = ANY(%(task_ids)s)"""

# --- the batch pickup --------------------------------------------------------------------------------

# PostgreSQL's alone. 2 → 4 with ``expire_at``; only succeeded tasks move.
MARK_DOWNLOADED = """UPDATE asynch_task SET state = 4, expire_at = %(expire_at)s, updated_at = %(now)s
WHERE state = 2 AND id = ANY(%(task_ids)s) RETURNING id"""

# --- the cleaner ---------------------------------------------------------------------------------------

# PostgreSQL's alone. Retries that waited at the tail until ``jump_at`` move to the head.
PROMOTE_WAITING_RETRIES = """UPDATE asynch_task SET priority = 0, updated_at = %(now)s
WHERE state = 0 AND priority = 1 AND id = ANY(ARRAY(
    SELECT id FROM asynch_task WHERE state = 0 AND priority = 1 AND jump_at <= %(now)s
    ORDER BY jump_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED
))"""

# PostgreSQL's alone. → 3 for stuck tasks, with why: running tasks whose worker stopped
# renewing its lease; tasks queued before ``queued_before``; running tasks started
# before ``started_before``, but for those of the models in ``long_names``, stuck only
# once started before their own moment (``long_started_before[i]``): a live call is
# never failed before its model's timeout. The ids failed, for their webhooks.
FAIL_STUCK = """UPDATE asynch_task SET state = 3, finished_at = %(now)s, lease_until = NULL, updated_at = %(now)s,
    error_message = CASE WHEN state = 0 THEN 'Timed out waiting in the queue'
        WHEN lease_until < %(now)s THEN 'The worker running the task stopped (its lease lapsed)'
        ELSE 'Timed out while running' END
WHERE id = ANY(ARRAY(
    SELECT id FROM asynch_task t
    WHERE (t.state = 1 AND t.lease_until < %(now)s)
        OR (t.state = 0 AND t.enqueue_at < %(queued_before)s)
        OR (t.state = 1 AND t.started_at < %(started_before)s AND t.model_name <> ALL(CAST(%(long_names)s AS text[])))
        OR (t.state = 1 AND EXISTS (
            SELECT 1 FROM unnest(CAST(%(long_names)s AS text[]), CAST(%(long_started_before)s AS timestamptz[]))
                AS l(model_name, started_before)
            WHERE l.model_name = t.model_name AND t.started_at < l.started_before
        ))
    ORDER BY id LIMIT %(limit)s FOR UPDATE SKIP LOCKED
))
RETURNING id"""

# PostgreSQL's alone. Tasks still in one of ``states`` deleted, with any answer kept for
# them: (id, stored file) of each.
DELETE_TASKS = """WITH answers AS (
    DELETE FROM asynch_task_answer WHERE task_id IN (
        SELECT id FROM asynch_task WHERE state = ANY(%(states)s) AND id = ANY(%(task_ids)s)
    )
)
DELETE FROM asynch_task WHERE state = ANY(%(states)s) AND id = ANY(%(task_ids)s) RETURNING id, oss_file"""

# --- statistics -------------------------------------------------------------------------------------

# Real model calls on a day, counted in one atomic upsert (``calls`` < 0 takes back
# calls counted for tasks that were then not called).
COUNT_CALLS = """INSERT INTO asynch_model_stat (day, tenant_id, creator, model_name, request_count, updated_at)
VALUES (%(day)s, %(tenant_id)s, %(creator)s, %(model_name)s, %(calls)s, %(now)s)
ON CONFLICT (day, tenant_id, creator, model_name) DO UPDATE
SET request_count = asynch_model_stat.request_count + excluded.request_count, updated_at = excluded.updated_at"""
