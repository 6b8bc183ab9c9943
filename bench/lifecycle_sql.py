"""The job lifecycle's statements written out by hand, for the raw-SQL floors the
benchmarks measure the platform against: what the database alone allows, with no
HTTP, no service layer and no validation on top.

The ``RAW_*`` statements are bench_lifecycle's floors (the three transitions, then
every statement the service's result transaction runs); the ``FLOOR_*`` ones are
bench_e2e's, the transitions with the leases checked as the service checks them."""

from __future__ import annotations

import psycopg

COLUMNS = (
    "id, user_id, job_type, target_type, target_id, status, priority, api_key_mode, model_provider, model_name, "
    "prompt_version, output_schema_version, attempt_no, params, cancel_requested, retry_count, max_retry_count, "
    "timeout_seconds, available_at, created_at, updated_at, quota_date"
)


def insert_pending(
    conn: psycopg.Connection,
    user_id: int,
    count: int,
    prefix: str,
    target_id: str = "me",
    snapshot_id: str | None = None,
) -> None:
    """``count`` pending jobs; with ``snapshot_id``, each already names that snapshot."""
    conn.execute(
        f"INSERT INTO ai_runtime_job ({COLUMNS}, snapshot_id) SELECT %s || lpad(i::text, 9, '0'), %s, "
        "'learning_state_analysis', "
        "'user', %s, 'pending', 0, 'platform_key', 'deepseek', 'deepseek-chat', 'v1', 'v1', 0, '{}'::jsonb, false, "
        "0, 3, 120, now() - interval '1 minute', now() - interval '1 minute' + i * interval '1 microsecond', now(), "
        "current_date, %s "
        "FROM generate_series(1, %s) AS i",
        (prefix, user_id, target_id, snapshot_id, count),
    )
    conn.commit()


RAW_CLAIM = (
    "WITH picked AS MATERIALIZED (SELECT id FROM ai_runtime_job WHERE status = 'pending' AND available_at <= now() "
    "AND job_type = ANY(%s) ORDER BY priority, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
    "UPDATE ai_runtime_job SET status = 'locked', locked_by = %s, locked_at = now(), "
    "lock_until = now() + interval '60 seconds', attempt_no = attempt_no + 1, updated_at = now() "
    "WHERE id IN (SELECT id FROM picked) RETURNING id, attempt_no"
)
RAW_HEARTBEAT = (
    "UPDATE ai_runtime_job SET lock_until = now() + interval '60 seconds', status = 'running', updated_at = now() "
    "WHERE id = %s AND status IN ('locked', 'running') AND locked_by = %s RETURNING cancel_requested"
)
RAW_SUCCEED = (
    "UPDATE ai_runtime_job SET status = 'succeeded', finished_at = now(), lock_until = NULL, updated_at = now() "
    "WHERE id = %s AND status IN ('locked', 'running') AND locked_by = %s AND attempt_no = %s RETURNING job_type"
)
RAW_RESULT = (
    "INSERT INTO ai_runtime_result (id, job_id, attempt_no, idempotency_key, output_hash, output_schema_version, "
    "output, prompt_tokens, completion_tokens, total_tokens, cost_cents, runtime_instance_id, created_at) "
    "VALUES (%s, %s, %s, %s, 'h', 'v1', %s, 10, 10, 20, 0, %s, now())"
)


RAW_ANALYSIS = (
    "INSERT INTO ai_learning_analysis (id, user_id, job_id, target_type, target_id, created_at, summary, "
    "mastery_score, level, strengths, weaknesses, confidence) VALUES (%s, %s, %s, 'user', %s, now(), 'ok', 50, "
    "'developing', '[]', '[]', 0.5)"
)
RAW_NOTICE = (
    "INSERT INTO ai_notification (id, user_id, job_id, target_type, target_id, created_at, kind, job_type, title, "
    "message, data) VALUES (%s, %s, %s, 'user', %s, now(), 'job_succeeded', 'learning_state_analysis', "
    "'Learning analysis ready', 'Mastery 50/100, level developing.', '{}') ON CONFLICT DO NOTHING"
)
# The user's day, the platform's shard, the day's total and the breaker's reset: one statement.
RAW_USAGE = (
    "WITH user_day AS (INSERT INTO quota_user_ai_usage (user_id, local_date, api_key_mode, job_count, tokens_used, "
    "cost_cents, updated_at) VALUES (%s, current_date, 'platform_key', 0, 20, 0.01, now()) "
    "ON CONFLICT (user_id, local_date, api_key_mode) DO UPDATE SET "
    "tokens_used = quota_user_ai_usage.tokens_used + EXCLUDED.tokens_used, "
    "cost_cents = quota_user_ai_usage.cost_cents + EXCLUDED.cost_cents, updated_at = EXCLUDED.updated_at RETURNING 1), "
    "shard AS (INSERT INTO quota_platform_daily_usage (day, shard, tokens_used, cost_cents, updated_at) "
    "VALUES (current_date, %s, 20, 0.01, now()) ON CONFLICT (day, shard) DO UPDATE SET "
    "tokens_used = quota_platform_daily_usage.tokens_used + EXCLUDED.tokens_used, "
    "cost_cents = quota_platform_daily_usage.cost_cents + EXCLUDED.cost_cents, updated_at = EXCLUDED.updated_at "
    "RETURNING tokens_used, cost_cents), "
    "breaker AS (UPDATE quota_platform_circuit_breaker SET consecutive_failures = 0 WHERE id = 1 "
    "AND (consecutive_failures > 0 OR state = 'half_open') RETURNING state) "
    "SELECT (SELECT tokens_used FROM shard) + (SELECT COALESCE(SUM(tokens_used), 0) FROM quota_platform_daily_usage "
    "WHERE day = current_date AND shard <> %s), (SELECT state FROM breaker)"
)

# bench_e2e's floor: the three transitions as the service writes them, leases checked.
FLOOR_CLAIM = (
    "WITH picked AS MATERIALIZED (SELECT id FROM ai_runtime_job WHERE status = 'pending' AND available_at <= now() "
    "AND job_type = ANY(%s) ORDER BY priority, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
    "UPDATE ai_runtime_job SET status = 'locked', locked_by = %s, locked_at = now(), "
    "lock_until = now() + interval '60 seconds', deadline_ms = 0, attempt_no = attempt_no + 1, updated_at = now() "
    "WHERE status = 'pending' AND id IN (SELECT id FROM picked) RETURNING id, attempt_no"
)
FLOOR_HEARTBEAT = (
    "UPDATE ai_runtime_job SET lock_until = now() + interval '60 seconds', status = 'running', "
    "started_at = CASE WHEN status = 'locked' THEN now() ELSE started_at END, updated_at = now() "
    "WHERE id = %s AND status IN ('locked', 'running') AND locked_by = %s AND lock_until >= now() "
    "RETURNING cancel_requested"
)
FLOOR_SUCCEED = (
    "UPDATE ai_runtime_job SET status = 'succeeded', finished_at = now(), lock_until = NULL, updated_at = now() "
    "WHERE id = %s AND status IN ('locked', 'running') AND locked_by = %s AND lock_until >= now() "
    "AND attempt_no = %s RETURNING id"
)
FLOOR_RESULT = (
    "INSERT INTO ai_runtime_result (id, job_id, attempt_no, idempotency_key, output_hash, output_schema_version, "
    "output, prompt_tokens, completion_tokens, total_tokens, cost_cents, runtime_instance_id, created_at) "
    "VALUES (%s, %s, %s, %s, %s, 'v1', %s, 500, 50, 550, 0.0161, %s, now())"
)
