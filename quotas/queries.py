"""The quotas app's statements, each written out whole with named parameters.

They are SQL because each is one conditional statement the ORM cannot say in one go
(an upsert whose WHERE admits an increment only under a limit, ``RETURNING`` what it
wrote), or because the hot path runs it on every request. ``config.sql`` runs them on
PostgreSQL and SQLite alike, but ``COUNT_USAGE``, which is PostgreSQL's alone.
"""

# --- the user's settings and day -------------------------------------------------------------------

# The user's settings and their usage rows of the three calendar days one of which is
# theirs today (every time zone lies within a day of UTC): what ``POST /ai/jobs`` reads
# for consent and the day's counters, in one statement, none compiled per request.
SETTINGS_AND_USAGE = """SELECT s.id, s.user_id, s.ai_analysis_enabled, s.timezone, s.default_api_key_mode,
    s.max_daily_ai_jobs, s.max_daily_token_budget, s.quota_epoch, s.created_at, s.updated_at,
    u.local_date, u.api_key_mode, u.job_count, u.tokens_used, u.cost_cents
FROM quota_user_ai_settings s
LEFT JOIN quota_user_ai_usage u
    ON u.user_id = s.user_id AND u.local_date BETWEEN %(first_day)s AND %(last_day)s
WHERE s.user_id = %(user_id)s"""
# The settings' fields SETTINGS_AND_USAGE selects first, in its order.
SETTINGS_FIELDS = (
    "id",
    "user_id",
    "ai_analysis_enabled",
    "timezone",
    "default_api_key_mode",
    "max_daily_ai_jobs",
    "max_daily_token_budget",
    "quota_epoch",
    "created_at",
    "updated_at",
)

# --- the user's usage --------------------------------------------------------------------------------

# One more job on the user's day, only while both limits have room: concurrent requests
# at the limit never count more jobs than it allows. A day the user has left by a change
# of timezone (``left_epoch`` above the ``quota_epoch`` their settings were read with)
# takes no more jobs; a job admitted on a day makes it the user's own again.
RESERVE_JOB = """INSERT INTO quota_user_ai_usage
    (user_id, local_date, api_key_mode, job_count, tokens_used, cost_cents, updated_at)
VALUES (%(user_id)s, %(day)s, %(api_key_mode)s, 1, 0, 0, %(now)s)
ON CONFLICT (user_id, local_date, api_key_mode) DO UPDATE
SET job_count = quota_user_ai_usage.job_count + 1, moved_to = NULL, left_epoch = NULL,
    updated_at = EXCLUDED.updated_at
WHERE quota_user_ai_usage.job_count < %(max_jobs)s
    AND quota_user_ai_usage.tokens_used < %(max_tokens)s
    AND (quota_user_ai_usage.left_epoch IS NULL OR quota_user_ai_usage.left_epoch <= %(epoch)s)
RETURNING job_count"""

# --- the timezone move: the day left to the day arrived in ----------------------------------------------
# Each row is locked before it is read, the day arrived in first: a result's tokens
# follow ``moved_to`` to the day the user is on last, so the two never wait on each
# other in a circle.

# The day arrived in is the user's again (a pointer of its own, from an earlier move, cleared).
ARRIVE_ON_DAY = """UPDATE quota_user_ai_usage SET moved_to = NULL, left_epoch = NULL, updated_at = %(now)s
WHERE user_id = %(user_id)s AND local_date = %(arrived)s"""

# The day left points to the day arrived in and takes no job reserved before the new
# epoch: its rows of both key modes are made even when nothing was counted on them yet,
# so a reservation racing the move meets them.
LEAVE_DAY = """INSERT INTO quota_user_ai_usage
    (user_id, local_date, api_key_mode, job_count, tokens_used, cost_cents, moved_to, left_epoch, updated_at)
VALUES (%(user_id)s, %(left)s, 'platform_key', 0, 0, 0, %(arrived)s, %(epoch)s, %(now)s),
    (%(user_id)s, %(left)s, 'user_deepseek_key', 0, 0, 0, %(arrived)s, %(epoch)s, %(now)s)
ON CONFLICT (user_id, local_date, api_key_mode) DO UPDATE
SET moved_to = EXCLUDED.moved_to, left_epoch = EXCLUDED.left_epoch, updated_at = EXCLUDED.updated_at"""

# Each counter of the day arrived in becomes at least the day left's, per key mode.
CARRY_USAGE = """INSERT INTO quota_user_ai_usage
    (user_id, local_date, api_key_mode, job_count, tokens_used, cost_cents, updated_at)
SELECT user_id, %(arrived)s, api_key_mode, job_count, tokens_used, cost_cents, %(now)s
FROM quota_user_ai_usage
WHERE user_id = %(user_id)s AND local_date = %(left)s AND (job_count > 0 OR tokens_used > 0 OR cost_cents > 0)
ON CONFLICT (user_id, local_date, api_key_mode) DO UPDATE
SET job_count = CASE WHEN EXCLUDED.job_count > quota_user_ai_usage.job_count
        THEN EXCLUDED.job_count ELSE quota_user_ai_usage.job_count END,
    tokens_used = CASE WHEN EXCLUDED.tokens_used > quota_user_ai_usage.tokens_used
        THEN EXCLUDED.tokens_used ELSE quota_user_ai_usage.tokens_used END,
    cost_cents = CASE WHEN EXCLUDED.cost_cents > quota_user_ai_usage.cost_cents
        THEN EXCLUDED.cost_cents ELSE quota_user_ai_usage.cost_cents END,
    updated_at = EXCLUDED.updated_at"""

# --- the platform's day --------------------------------------------------------------------------------

# The platform's tokens and cost of a day: the sum of its shards. Every platform-key
# result reads it.
PLATFORM_USAGE_OF_DAY = """SELECT COALESCE(SUM(tokens_used), 0), COALESCE(SUM(cost_cents), 0)
FROM quota_platform_daily_usage WHERE day = %(day)s"""

# The platform key's say on a new job: the day's totals and the breaker's state, read
# together (a breaker never written yet has no row: NULL).
PLATFORM_ADMISSION = """SELECT COALESCE(SUM(tokens_used), 0), COALESCE(SUM(cost_cents), 0),
    (SELECT state FROM quota_platform_circuit_breaker WHERE id = 1)
FROM quota_platform_daily_usage WHERE day = %(day)s"""

# --- the circuit breaker -----------------------------------------------------------------------------

BREAKER_STATE = "SELECT state FROM quota_platform_circuit_breaker WHERE id = 1"

# A platform-key model failure counted: the count and the state it was counted in.
COUNT_BREAKER_FAILURE = """UPDATE quota_platform_circuit_breaker SET consecutive_failures = consecutive_failures + 1
WHERE id = 1 RETURNING consecutive_failures, state"""

# --- counting tokens and cost (quotas.services.counting), PostgreSQL's one statement -----------------

# Tokens and cost counted on the user's day (``day``; no ``user_id``: none), with ``platform``
# on a shard of the platform's day (``today``; a random shard, so concurrent results rarely
# queue for one row's lock), and with ``success`` (a platform-key result) the breaker's
# consecutive failures started again: the usual breaker (closed, no failures) matches no row,
# so its row is written only when it changes. Returns the platform's day after it (the CTEs
# see the snapshot the statement began with, not each other's writes: this shard's new row
# plus the other shards), the breaker's state when it was reset, and the day a change of
# timezone moved the user to from ``day``. PostgreSQL's alone: SQLite has no data-modifying
# CTEs and makes the same moves with the ORM.
COUNT_USAGE = """WITH user_day AS (
    INSERT INTO quota_user_ai_usage
        (user_id, local_date, api_key_mode, job_count, tokens_used, cost_cents, updated_at)
    SELECT CAST(%(user_id)s AS integer), CAST(%(day)s AS date), CAST(%(api_key_mode)s AS text), 0,
        CAST(%(tokens)s AS bigint), CAST(%(cost_cents)s AS numeric), CAST(%(now)s AS timestamptz)
    WHERE CAST(%(user_id)s AS integer) IS NOT NULL
    ON CONFLICT (user_id, local_date, api_key_mode) DO UPDATE
    SET tokens_used = quota_user_ai_usage.tokens_used + EXCLUDED.tokens_used,
        cost_cents = quota_user_ai_usage.cost_cents + EXCLUDED.cost_cents,
        updated_at = EXCLUDED.updated_at
    RETURNING moved_to
), shard AS (
    INSERT INTO quota_platform_daily_usage (day, shard, tokens_used, cost_cents, updated_at)
    SELECT CAST(%(today)s AS date), CAST(%(shard)s AS smallint), CAST(%(tokens)s AS bigint),
        CAST(%(cost_cents)s AS numeric), CAST(%(now)s AS timestamptz)
    WHERE CAST(%(platform)s AS boolean)
    ON CONFLICT (day, shard) DO UPDATE
    SET tokens_used = quota_platform_daily_usage.tokens_used + EXCLUDED.tokens_used,
        cost_cents = quota_platform_daily_usage.cost_cents + EXCLUDED.cost_cents,
        updated_at = EXCLUDED.updated_at
    RETURNING tokens_used, cost_cents
), breaker AS (
    UPDATE quota_platform_circuit_breaker SET consecutive_failures = 0
    WHERE CAST(%(success)s AS boolean) AND id = 1 AND (consecutive_failures > 0 OR state = 'half_open')
    RETURNING state
), others AS (
    SELECT COALESCE(SUM(tokens_used), 0) AS tokens, COALESCE(SUM(cost_cents), 0) AS cost
    FROM quota_platform_daily_usage
    WHERE CAST(%(platform)s AS boolean) AND day = CAST(%(today)s AS date) AND shard <> CAST(%(shard)s AS smallint)
)
SELECT (SELECT tokens_used FROM shard) + (SELECT tokens FROM others),
    (SELECT cost_cents FROM shard) + (SELECT cost FROM others),
    (SELECT state FROM breaker),
    (SELECT moved_to FROM user_day)"""

# --- throttles without Redis ---------------------------------------------------------------------------

# A request counted in its throttle window's row: the count after it, and the end the
# window's first request set (a claimId's first sighting: quotas.throttles.first_seen_in_database).
COUNT_THROTTLE_WINDOW = """INSERT INTO quotas_throttle_window (window_key, count, expires_at)
VALUES (%(key)s, 1, %(expires_at)s)
ON CONFLICT (window_key) DO UPDATE SET count = quotas_throttle_window.count + 1
RETURNING count, expires_at"""

# A window's count without counting (0 when nothing was counted in it).
PEEK_THROTTLE_WINDOW = "SELECT count FROM quotas_throttle_window WHERE window_key = %(key)s"

FORGET_THROTTLE_WINDOW = "DELETE FROM quotas_throttle_window WHERE window_key = %(key)s"

# The windows that have ended, swept so the table holds only the current ones.
SWEEP_THROTTLE_WINDOWS = "DELETE FROM quotas_throttle_window WHERE expires_at < %(now)s"
