"""The learning app's SQL: the snapshot document (learning/SNAPSHOT.md) as PostgreSQL
builds it, each statement returning the whole document as JSON text in one round
trip, every list sliced and every long text cut in the database: one for the user
target, one for the three targets that live in a knowledge base.

``json_build_object`` and ``json_agg`` are PostgreSQL's alone: the embedded default
(SQLite) builds the same document with the ORM (``learning.snapshots.builders``), and
``tests/test_snapshot_sql.py`` holds the two to the same document for every target
and past every bound. The bounds written here are those of
``learning.snapshots.parts`` (``MAX_KNOWLEDGE_POINTS`` and the others): change both.

Parameters: ``user_id``; ``timezone``, the learner's IANA zone, which decides their
local dates; ``today``, their local date; ``learner`` and ``target``, JSON text, the
document's first two values; ``generated_at``; for the user target ``found``, whether
the target's id names the learner; for the others ``target_type`` and ``target_id``.

Said the same way in every statement:
- study days are the distinct local dates of the attempts (``*_days``); consecutive
  days are an island of dates whose difference from their rank is the same
  (``*_runs``); the current streak is the latest run if it ends today or yesterday;
- a datetime is written as Python's ``isoformat`` writes it in UTC, with microseconds
  only when there are some;
- ratios are rounded to 4 decimals and mean scores to 2, ``null`` without attempts;
  the mastery level compares the rounded accuracy, as the ORM does.
"""

# The user target: all the learner's attempts, knowledge bases and points, when
# ``target_id`` names the learner (``found``), else only what every document has.
SNAPSHOT_OF_USER = """
WITH p AS (
    SELECT CAST(%(user_id)s AS integer) AS user_id, CAST(%(found)s AS boolean) AS found,
           CAST(%(timezone)s AS text) AS tz, CAST(%(today)s AS date) AS today
),
own AS (SELECT * FROM learning_study_record WHERE user_id = (SELECT user_id FROM p)),
own_days AS (SELECT DISTINCT (studied_at AT TIME ZONE (SELECT tz FROM p))::date AS day FROM own),
own_runs AS (
    SELECT COUNT(*) AS days, MAX(day) AS last
    FROM (SELECT day, day - CAST(ROW_NUMBER() OVER (ORDER BY day) AS integer) AS island FROM own_days) d GROUP BY island
),
overall AS (
    SELECT json_build_object(
        'attemptCount', COUNT(*), 'correctCount', COUNT(*) FILTER (WHERE r.is_correct),
        'accuracy', round(CAST(COUNT(*) FILTER (WHERE r.is_correct) AS numeric) / NULLIF(COUNT(*), 0), 4),
        'averageScore', round(AVG(r.score)::numeric, 2), 'totalStudySeconds', COALESCE(SUM(r.duration_seconds), 0),
        'knowledgePointsStudied', COUNT(DISTINCT r.knowledge_point_id),
        'firstStudiedAt', replace(to_char(MIN(r.studied_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z',
        'lastStudiedAt', replace(to_char(MAX(r.studied_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z',
        'studyDays', (SELECT COUNT(*) FROM own_days),
        'currentStreakDays', COALESCE((SELECT days FROM own_runs WHERE last >= (SELECT today FROM p) - 1 ORDER BY last DESC LIMIT 1), 0),
        'longestStreakDays', COALESCE((SELECT MAX(days) FROM own_runs), 0)
    ) AS document FROM own r
),
bases AS (
    SELECT id, user_id, name, created_at FROM learning_knowledge_base
    WHERE user_id = (SELECT user_id FROM p) AND (SELECT found FROM p)
),
base_figures AS (
    SELECT k.knowledge_base_id AS id, COUNT(*) AS attempts, COUNT(*) FILTER (WHERE r.is_correct) AS correct,
           AVG(r.score) AS average_score, SUM(r.duration_seconds) AS seconds, MAX(r.studied_at) AS last
    FROM own r JOIN learning_knowledge_point k ON k.id = r.knowledge_point_id
    WHERE (SELECT found FROM p) GROUP BY k.knowledge_base_id
),
listed_bases AS (
    SELECT ROW_NUMBER() OVER (ORDER BY b.created_at DESC, b.id DESC) AS rn, json_build_object(
        'id', b.id, 'name', b.name,
        'knowledgePointCount', (SELECT COUNT(*) FROM learning_knowledge_point k WHERE k.user_id = b.user_id AND k.knowledge_base_id = b.id),
        'materialCount', (SELECT COUNT(*) FROM learning_material m WHERE m.user_id = b.user_id AND m.knowledge_base_id = b.id),
        'attemptCount', COALESCE(g.attempts, 0), 'accuracy', round(CAST(g.correct AS numeric) / NULLIF(g.attempts, 0), 4),
        'averageScore', round(g.average_score::numeric, 2), 'totalStudySeconds', COALESCE(g.seconds, 0),
        'lastStudiedAt', replace(to_char(g.last AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z'
    ) AS document
    FROM (SELECT * FROM bases ORDER BY created_at DESC, id DESC LIMIT 50) b LEFT JOIN base_figures g ON g.id = b.id
),
point_figures AS (
    SELECT k.id, k.knowledge_base_id, k.name, k.description, k.created_at, COUNT(r.id) AS attempts,
           COUNT(r.id) FILTER (WHERE r.is_correct) AS correct,
           round(CAST(COUNT(r.id) FILTER (WHERE r.is_correct) AS numeric) / NULLIF(COUNT(r.id), 0), 4) AS accuracy,
           AVG(r.score) AS average_score, COALESCE(SUM(r.duration_seconds), 0) AS seconds, MAX(r.studied_at) AS last
    FROM learning_knowledge_point k LEFT JOIN learning_study_record r ON r.knowledge_point_id = k.id
    WHERE k.user_id = (SELECT user_id FROM p) AND (SELECT found FROM p) GROUP BY k.id
),
points AS (
    SELECT id, ROW_NUMBER() OVER (ORDER BY last DESC NULLS LAST, created_at DESC, id DESC) AS rn, json_build_object(
        'id', id, 'knowledgeBaseId', knowledge_base_id, 'name', name,
        'description', left(description, 500), 'descriptionTruncated', length(description) > 500,
        'mastery', json_build_object(
            'attemptCount', attempts, 'correctCount', correct, 'accuracy', accuracy,
            'averageScore', round(average_score::numeric, 2), 'totalStudySeconds', seconds,
            'lastStudiedAt', replace(to_char(last AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z',
            'level', CASE WHEN attempts = 0 THEN 'not_started' WHEN accuracy < 0.6 THEN 'weak'
                          WHEN accuracy >= 0.85 AND attempts >= 3 THEN 'mastered' ELSE 'developing' END)
    ) AS document FROM point_figures
),
recent AS (
    SELECT ROW_NUMBER() OVER (ORDER BY r.studied_at DESC, r.id DESC) AS rn, json_build_object(
        'id', r.id, 'knowledgePointId', r.knowledge_point_id, 'knowledgePointName', k.name, 'isCorrect', r.is_correct,
        'score', r.score, 'durationSeconds', r.duration_seconds,
        'studiedAt', replace(to_char(r.studied_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z'
    ) AS document
    FROM own r JOIN learning_knowledge_point k ON k.id = r.knowledge_point_id
    WHERE (SELECT found FROM p) ORDER BY rn LIMIT 50
),
profile AS (
    SELECT COALESCE(
        (SELECT json_build_object(
            'goals', lp.goals, 'level', lp.level, 'preferredStudyTime', lp.preferred_study_time, 'preferences', lp.preferences,
            'updatedAt', replace(to_char(lp.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || '+00:00'
        ) FROM learning_profile lp WHERE lp.user_id = (SELECT user_id FROM p)),
        json_build_object('goals', '', 'level', '', 'preferredStudyTime', '', 'preferences', json_build_object(), 'updatedAt', NULL)
    ) AS document
)
SELECT json_build_object(
    'learner', CAST(%(learner)s AS json), 'target', CAST(%(target)s AS json),
    'learningSnapshotVersion', 'v2', 'generatedAt', CAST(%(generated_at)s AS text), 'timezone', (SELECT tz FROM p),
    'profile', (SELECT document FROM profile), 'overall', (SELECT document FROM overall),
    'targetFound', (SELECT found FROM p),
    'stats', CASE WHEN (SELECT found FROM p) THEN (SELECT document FROM overall) END,
    'knowledgeBases', COALESCE((SELECT json_agg(document ORDER BY rn) FROM listed_bases), '[]'),
    'knowledgeBasesTotal', (SELECT COUNT(*) FROM bases), 'knowledgeBasesTruncated', (SELECT COUNT(*) FROM bases) > 50,
    'knowledgePoints', COALESCE((SELECT json_agg(document ORDER BY rn) FROM points WHERE rn <= 200), '[]'),
    'knowledgePointsTotal', (SELECT COUNT(*) FROM points), 'knowledgePointsTruncated', (SELECT COUNT(*) FROM points) > 200,
    'recentAttempts', COALESCE((SELECT json_agg(document ORDER BY rn) FROM recent), '[]')
)::text
"""

# A knowledge base, or a material or knowledge point in one (``target_type``): the three
# are scoped by the base, and each branch of the last CASE is the document of one.
SNAPSHOT_IN_KNOWLEDGE_BASE = """
WITH p AS (
    SELECT CAST(%(user_id)s AS integer) AS user_id, CAST(%(target_type)s AS text) AS target_type,
           CAST(%(target_id)s AS text) AS target_id, CAST(%(timezone)s AS text) AS tz, CAST(%(today)s AS date) AS today
),
material AS (
    SELECT * FROM learning_material
    WHERE (SELECT target_type FROM p) = 'material' AND user_id = (SELECT user_id FROM p) AND id = (SELECT target_id FROM p)
),
point AS (
    SELECT * FROM learning_knowledge_point
    WHERE (SELECT target_type FROM p) = 'knowledge_point' AND user_id = (SELECT user_id FROM p) AND id = (SELECT target_id FROM p)
),
base AS (  -- the target knowledge base, or the base of the target material or point
    SELECT * FROM learning_knowledge_base WHERE user_id = (SELECT user_id FROM p) AND id IN (
        SELECT target_id FROM p WHERE target_type = 'knowledge_base'
        UNION ALL SELECT knowledge_base_id FROM material
        UNION ALL SELECT knowledge_base_id FROM point)
),
own AS (SELECT * FROM learning_study_record WHERE user_id = (SELECT user_id FROM p)),
own_days AS (SELECT DISTINCT (studied_at AT TIME ZONE (SELECT tz FROM p))::date AS day FROM own),
own_runs AS (
    SELECT COUNT(*) AS days, MAX(day) AS last
    FROM (SELECT day, day - CAST(ROW_NUMBER() OVER (ORDER BY day) AS integer) AS island FROM own_days) d GROUP BY island
),
overall AS (
    SELECT json_build_object(
        'attemptCount', COUNT(*), 'correctCount', COUNT(*) FILTER (WHERE r.is_correct),
        'accuracy', round(CAST(COUNT(*) FILTER (WHERE r.is_correct) AS numeric) / NULLIF(COUNT(*), 0), 4),
        'averageScore', round(AVG(r.score)::numeric, 2), 'totalStudySeconds', COALESCE(SUM(r.duration_seconds), 0),
        'knowledgePointsStudied', COUNT(DISTINCT r.knowledge_point_id),
        'firstStudiedAt', replace(to_char(MIN(r.studied_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z',
        'lastStudiedAt', replace(to_char(MAX(r.studied_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z',
        'studyDays', (SELECT COUNT(*) FROM own_days),
        'currentStreakDays', COALESCE((SELECT days FROM own_runs WHERE last >= (SELECT today FROM p) - 1 ORDER BY last DESC LIMIT 1), 0),
        'longestStreakDays', COALESCE((SELECT MAX(days) FROM own_runs), 0)
    ) AS document FROM own r
),
scope AS (  -- the attempts at the target point, or else at the points of the base
    SELECT * FROM own WHERE CASE WHEN (SELECT target_type FROM p) = 'knowledge_point'
        THEN knowledge_point_id IN (SELECT id FROM point)
        ELSE knowledge_point_id IN (SELECT id FROM learning_knowledge_point WHERE knowledge_base_id IN (SELECT id FROM base)) END
),
scope_days AS (SELECT DISTINCT (studied_at AT TIME ZONE (SELECT tz FROM p))::date AS day FROM scope),
scope_runs AS (
    SELECT COUNT(*) AS days, MAX(day) AS last
    FROM (SELECT day, day - CAST(ROW_NUMBER() OVER (ORDER BY day) AS integer) AS island FROM scope_days) d GROUP BY island
),
scope_stats AS (
    SELECT json_build_object(
        'attemptCount', COUNT(*), 'correctCount', COUNT(*) FILTER (WHERE r.is_correct),
        'accuracy', round(CAST(COUNT(*) FILTER (WHERE r.is_correct) AS numeric) / NULLIF(COUNT(*), 0), 4),
        'averageScore', round(AVG(r.score)::numeric, 2), 'totalStudySeconds', COALESCE(SUM(r.duration_seconds), 0),
        'knowledgePointsStudied', COUNT(DISTINCT r.knowledge_point_id),
        'firstStudiedAt', replace(to_char(MIN(r.studied_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z',
        'lastStudiedAt', replace(to_char(MAX(r.studied_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z',
        'studyDays', (SELECT COUNT(*) FROM scope_days),
        'currentStreakDays', COALESCE((SELECT days FROM scope_runs WHERE last >= (SELECT today FROM p) - 1 ORDER BY last DESC LIMIT 1), 0),
        'longestStreakDays', COALESCE((SELECT MAX(days) FROM scope_runs), 0)
    ) AS document FROM scope r
),
point_figures AS (
    SELECT k.id, k.knowledge_base_id, k.name, k.description, k.created_at, COUNT(r.id) AS attempts,
           COUNT(r.id) FILTER (WHERE r.is_correct) AS correct,
           round(CAST(COUNT(r.id) FILTER (WHERE r.is_correct) AS numeric) / NULLIF(COUNT(r.id), 0), 4) AS accuracy,
           AVG(r.score) AS average_score, COALESCE(SUM(r.duration_seconds), 0) AS seconds, MAX(r.studied_at) AS last
    FROM learning_knowledge_point k LEFT JOIN learning_study_record r ON r.knowledge_point_id = k.id
    WHERE k.user_id = (SELECT user_id FROM p) AND k.knowledge_base_id IN (SELECT id FROM base) GROUP BY k.id
),
points AS (
    SELECT id, ROW_NUMBER() OVER (ORDER BY last DESC NULLS LAST, created_at DESC, id DESC) AS rn, json_build_object(
        'id', id, 'knowledgeBaseId', knowledge_base_id, 'name', name,
        'description', left(description, 500), 'descriptionTruncated', length(description) > 500,
        'mastery', json_build_object(
            'attemptCount', attempts, 'correctCount', correct, 'accuracy', accuracy,
            'averageScore', round(average_score::numeric, 2), 'totalStudySeconds', seconds,
            'lastStudiedAt', replace(to_char(last AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z',
            'level', CASE WHEN attempts = 0 THEN 'not_started' WHEN accuracy < 0.6 THEN 'weak'
                          WHEN accuracy >= 0.85 AND attempts >= 3 THEN 'mastered' ELSE 'developing' END)
    ) AS document FROM point_figures
),
materials AS (
    SELECT id, title, content, created_at FROM learning_material
    WHERE user_id = (SELECT user_id FROM p) AND knowledge_base_id IN (SELECT id FROM base)
),
listed_materials AS (
    SELECT ROW_NUMBER() OVER (ORDER BY m.created_at DESC, m.id DESC) AS rn, json_build_object(
        'id', m.id, 'title', m.title, 'excerpt', left(m.content, x.chars),
        'contentLength', length(m.content), 'excerptTruncated', length(m.content) > x.chars
    ) AS document
    FROM materials m CROSS JOIN (  -- the listed share the budget, each excerpt within its bounds
        SELECT CAST(GREATEST(1000, LEAST(8000, 40000 / GREATEST(LEAST(COUNT(*), 30), 1))) AS integer) AS chars FROM materials
    ) x
    ORDER BY rn LIMIT 30
),
recent AS (
    SELECT ROW_NUMBER() OVER (ORDER BY r.studied_at DESC, r.id DESC) AS rn, json_build_object(
        'id', r.id, 'knowledgePointId', r.knowledge_point_id, 'knowledgePointName', k.name, 'isCorrect', r.is_correct,
        'score', r.score, 'durationSeconds', r.duration_seconds,
        'studiedAt', replace(to_char(r.studied_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z'
    ) AS document
    FROM scope r JOIN learning_knowledge_point k ON k.id = r.knowledge_point_id
    ORDER BY rn LIMIT 50
),
profile AS (
    SELECT COALESCE(
        (SELECT json_build_object(
            'goals', lp.goals, 'level', lp.level, 'preferredStudyTime', lp.preferred_study_time, 'preferences', lp.preferences,
            'updatedAt', replace(to_char(lp.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || '+00:00'
        ) FROM learning_profile lp WHERE lp.user_id = (SELECT user_id FROM p)),
        json_build_object('goals', '', 'level', '', 'preferredStudyTime', '', 'preferences', json_build_object(), 'updatedAt', NULL)
    ) AS document
),
base_document AS (
    SELECT json_build_object(
        'id', id, 'name', name, 'description', left(description, 500), 'descriptionTruncated', length(description) > 500
    ) AS document FROM base
)
SELECT (CASE (SELECT target_type FROM p)
WHEN 'knowledge_base' THEN json_build_object(
    'learner', CAST(%(learner)s AS json), 'target', CAST(%(target)s AS json),
    'learningSnapshotVersion', 'v2', 'generatedAt', CAST(%(generated_at)s AS text), 'timezone', (SELECT tz FROM p),
    'profile', (SELECT document FROM profile), 'overall', (SELECT document FROM overall),
    'targetFound', EXISTS (SELECT 1 FROM base),
    'knowledgeBase', (SELECT document FROM base_document),
    'stats', CASE WHEN EXISTS (SELECT 1 FROM base) THEN (SELECT document FROM scope_stats) END,
    'knowledgePoints', COALESCE((SELECT json_agg(document ORDER BY rn) FROM points WHERE rn <= 200), '[]'),
    'knowledgePointsTotal', (SELECT COUNT(*) FROM points), 'knowledgePointsTruncated', (SELECT COUNT(*) FROM points) > 200,
    'materials', COALESCE((SELECT json_agg(document ORDER BY rn) FROM listed_materials), '[]'),
    'materialsTotal', (SELECT COUNT(*) FROM materials), 'materialsTruncated', (SELECT COUNT(*) FROM materials) > 30,
    'recentAttempts', COALESCE((SELECT json_agg(document ORDER BY rn) FROM recent), '[]'))
WHEN 'material' THEN json_build_object(
    'learner', CAST(%(learner)s AS json), 'target', CAST(%(target)s AS json),
    'learningSnapshotVersion', 'v2', 'generatedAt', CAST(%(generated_at)s AS text), 'timezone', (SELECT tz FROM p),
    'profile', (SELECT document FROM profile), 'overall', (SELECT document FROM overall),
    'targetFound', EXISTS (SELECT 1 FROM material),
    'material', (SELECT json_build_object(
        'id', id, 'knowledgeBaseId', knowledge_base_id, 'title', title, 'content', left(content, 20000),
        'contentLength', length(content), 'contentTruncated', length(content) > 20000,
        'createdAt', replace(to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z',
        'updatedAt', replace(to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z'
    ) FROM material),
    'knowledgeBase', (SELECT document FROM base_document),
    'stats', CASE WHEN EXISTS (SELECT 1 FROM material) THEN (SELECT document FROM scope_stats) END,
    'knowledgePoints', COALESCE((SELECT json_agg(document ORDER BY rn) FROM points WHERE rn <= 200), '[]'),
    'knowledgePointsTotal', (SELECT COUNT(*) FROM points), 'knowledgePointsTruncated', (SELECT COUNT(*) FROM points) > 200,
    'recentAttempts', COALESCE((SELECT json_agg(document ORDER BY rn) FROM recent), '[]'))
ELSE json_build_object(
    'learner', CAST(%(learner)s AS json), 'target', CAST(%(target)s AS json),
    'learningSnapshotVersion', 'v2', 'generatedAt', CAST(%(generated_at)s AS text), 'timezone', (SELECT tz FROM p),
    'profile', (SELECT document FROM profile), 'overall', (SELECT document FROM overall),
    'targetFound', EXISTS (SELECT 1 FROM point),
    'knowledgePoint', (SELECT document FROM points WHERE id IN (SELECT id FROM point)),
    'knowledgeBase', (SELECT document FROM base_document),
    'stats', CASE WHEN EXISTS (SELECT 1 FROM point) THEN (SELECT document FROM scope_stats) END,
    'knowledgePoints', COALESCE((SELECT json_agg(document ORDER BY rn) FROM points WHERE rn <= 200), '[]'),
    'knowledgePointsTotal', (SELECT COUNT(*) FROM points), 'knowledgePointsTruncated', (SELECT COUNT(*) FROM points) > 200,
    'materials', COALESCE((SELECT json_agg(document ORDER BY rn) FROM listed_materials), '[]'),
    'materialsTotal', (SELECT COUNT(*) FROM materials), 'materialsTruncated', (SELECT COUNT(*) FROM materials) > 30,
    'recentAttempts', COALESCE((SELECT json_agg(document ORDER BY rn) FROM recent), '[]'))
END)::text
"""
