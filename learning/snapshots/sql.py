"""The snapshot document (learning/SNAPSHOT.md) assembled by the database in one
statement, as serialized JSON text: ``json_build_object`` / ``json_agg`` on
PostgreSQL, json1's ``json_object`` / ``json_group_array`` on SQLite (the embedded
default), the same document on both.

It says in SQL what the builders of ``learning.snapshots`` say with the ORM (they
remain the readable reference, and a test holds the two to the same document): every
list is sliced and every long text cut in the database, per-point and per-base
figures are grouped there, and study days and streaks are counted there (gaps and
islands over the learner's local dates). Python only picks the statement for the
target type and passes the values in.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import connection

from learning.snapshots.parts import (
    DESCRIPTION_EXCERPT_CHARS,
    LEARNING_SNAPSHOT_VERSION,
    MASTERED_ACCURACY,
    MASTERED_MIN_ATTEMPTS,
    MATERIAL_CONTENT_CHARS,
    MATERIAL_EXCERPT_MAX_CHARS,
    MATERIAL_EXCERPT_MIN_CHARS,
    MATERIALS_EXCERPT_BUDGET,
    MAX_KNOWLEDGE_BASES,
    MAX_KNOWLEDGE_POINTS,
    MAX_MATERIALS,
    MAX_RECENT_ATTEMPTS,
    WEAK_ACCURACY,
)

RECORDS = "learning_study_record"
POINTS = "learning_knowledge_point"
BASES = "learning_knowledge_base"
MATERIALS = "learning_material"
PROFILES = "learning_profile"


@dataclass(frozen=True)
class Dialect:
    """The few spellings PostgreSQL and SQLite do not share."""

    postgres: bool

    def obj(self, *pairs: tuple[str, str]) -> str:
        function = "json_build_object" if self.postgres else "json_object"
        arguments = ", ".join(f"'{key}', {value}" for key, value in pairs)
        return f"{function}({arguments})"

    def sub(self, select: str) -> str:
        """A JSON value read through a scalar subquery (SQLite would take it for text)."""
        return f"({select})" if self.postgres else f"json(({select}))"

    def array(self, select: str) -> str:
        """The ``j`` column of ``select`` (ordered by its ``rn``) as a JSON array."""
        if self.postgres:
            return f"COALESCE((SELECT json_agg(x.j ORDER BY x.rn) FROM ({select}) x), '[]'::json)"
        return f"json((SELECT json_group_array(json(x.j)) FROM ({select}) x))"

    def boolean(self, condition: str) -> str:
        return f"({condition})" if self.postgres else f"json(CASE WHEN {condition} THEN 'true' ELSE 'false' END)"

    def iso(self, column: str, zone: str = "Z") -> str:
        """A datetime as Python's ``isoformat`` writes it in UTC (no fraction when it is 0)."""
        if self.postgres:
            utc = f"({column} AT TIME ZONE 'UTC')"
            return (
                f"(to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS') || CASE WHEN mod(date_part('microseconds', {utc})::bigint, "
                f"1000000) = 0 THEN '' ELSE to_char({utc}, '.US') END || '{zone}')"
            )
        return f"(replace({column}, ' ', 'T') || '{zone}')"

    def day(self, column: str) -> str:
        """The learner's local date of a datetime, as a day number."""
        if self.postgres:
            return f"(({column} AT TIME ZONE (SELECT tz FROM p))::date - DATE '2000-01-01')"
        return f"CAST(julianday(django_datetime_cast_date({column}, (SELECT tz FROM p), 'UTC')) AS INTEGER)"

    def today(self) -> str:
        if self.postgres:
            return "(CAST(%s AS date) - DATE '2000-01-01')"
        return "CAST(julianday(%s) AS INTEGER)"

    def left(self, column: str, chars: str) -> str:
        return f"left({column}, ({chars})::int)" if self.postgres else f"substr({column}, 1, {chars})"

    def ratio(self, part: str, whole: str) -> str:
        if self.postgres:
            return f"(CASE WHEN {whole} > 0 THEN round(({part})::numeric / {whole}, 4) END)"
        return f"(CASE WHEN {whole} > 0 THEN round(({part}) * 1.0 / {whole}, 4) END)"

    def round2(self, value: str) -> str:
        return f"round(({value})::numeric, 2)" if self.postgres else f"round({value}, 2)"

    def least(self, *values: str) -> str:
        return f"{'LEAST' if self.postgres else 'min'}({', '.join(values)})"

    def greatest(self, *values: str) -> str:
        return f"{'GREATEST' if self.postgres else 'max'}({', '.join(values)})"

    def json_column(self, column: str) -> str:
        return column if self.postgres else f"json({column})"


def _stats(d: Dialect, records: str) -> str:
    """Stats (SNAPSHOT.md) of the attempts ``records`` selects (a CTE's name)."""
    correct = "COALESCE(SUM(CASE WHEN r.is_correct THEN 1 ELSE 0 END), 0)"
    streak = (
        f"WITH days AS (SELECT DISTINCT {d.day('studied_at')} AS day FROM {records}), "
        "islands AS (SELECT day, day - ROW_NUMBER() OVER (ORDER BY day) AS island FROM days), "
        "runs AS (SELECT COUNT(*) AS n, MAX(day) AS last FROM islands GROUP BY island) "
    )
    days = f"(SELECT COUNT(*) FROM (SELECT DISTINCT {d.day('studied_at')} AS day FROM {records}) days)"
    longest = f"COALESCE(({streak}SELECT MAX(n) FROM runs), 0)"
    current = (
        f"COALESCE(({streak}SELECT n FROM runs WHERE last >= (SELECT today FROM p) - 1 ORDER BY last DESC LIMIT 1), 0)"
    )
    return d.sub(
        "SELECT "
        + d.obj(
            ("attemptCount", "COUNT(*)"),
            ("correctCount", correct),
            ("accuracy", d.ratio(correct, "COUNT(*)")),
            ("averageScore", d.round2("AVG(r.score)")),
            ("totalStudySeconds", "COALESCE(SUM(r.duration_seconds), 0)"),
            ("knowledgePointsStudied", "COUNT(DISTINCT r.knowledge_point_id)"),
            ("firstStudiedAt", d.iso("MIN(r.studied_at)")),
            ("lastStudiedAt", d.iso("MAX(r.studied_at)")),
            ("studyDays", days),
            ("currentStreakDays", current),
            ("longestStreakDays", longest),
        )
        + f" FROM {records} r"
    )


def _figures(d: Dialect, prefix: str) -> list[tuple[str, str]]:
    """attemptCount .. lastStudiedAt of grouped columns ``{prefix}n``, ``c``, ``a``, ``s``, ``last``."""
    n = f"COALESCE({prefix}n, 0)"
    return [
        ("attemptCount", n),
        ("accuracy", d.ratio(f"{prefix}c", n)),
        ("averageScore", d.round2(f"{prefix}a")),
        ("totalStudySeconds", f"COALESCE({prefix}s, 0)"),
        ("lastStudiedAt", d.iso(f"{prefix}last")),
    ]


_GROUPED = (
    "COUNT(r.id) AS n, COALESCE(SUM(CASE WHEN r.is_correct THEN 1 ELSE 0 END), 0) AS c, AVG(r.score) AS a, "
    "SUM(r.duration_seconds) AS s, MAX(r.studied_at) AS last"
)


def _point(d: Dialect, q: str) -> str:
    """A KnowledgePoint (SNAPSHOT.md) of a row ``q`` of points with their grouped figures."""
    accuracy = d.ratio(f"{q}.c", f"{q}.n")
    level = (
        f"CASE WHEN {q}.n = 0 THEN 'not_started' WHEN {accuracy} < {WEAK_ACCURACY} THEN 'weak' "
        f"WHEN {accuracy} >= {MASTERED_ACCURACY} AND {q}.n >= {MASTERED_MIN_ATTEMPTS} THEN 'mastered' "
        "ELSE 'developing' END"
    )
    figures = _figures(d, f"{q}.")
    return d.obj(
        ("id", f"{q}.id"),
        ("knowledgeBaseId", f"{q}.knowledge_base_id"),
        ("name", f"{q}.name"),
        ("description", d.left(f"{q}.description", str(DESCRIPTION_EXCERPT_CHARS))),
        ("descriptionTruncated", d.boolean(f"length({q}.description) > {DESCRIPTION_EXCERPT_CHARS}")),
        ("mastery", d.obj(figures[0], ("correctCount", f"{q}.c"), *figures[1:], ("level", level))),
    )


_WITH_FIGURES = (
    "SELECT k.id, k.knowledge_base_id, k.name, k.description, k.created_at, {grouped} FROM {points} k "
    f"LEFT JOIN {RECORDS} r ON r.knowledge_point_id = k.id "
    "GROUP BY k.id, k.knowledge_base_id, k.name, k.description, k.created_at"
)


def _points(d: Dialect, points: str) -> list[tuple[str, str]]:
    """knowledgePoints (with mastery), their total and whether the list was cut."""
    rows = _WITH_FIGURES.format(grouped=_GROUPED, points=points)
    listed = (
        f"SELECT {_point(d, 'q')} AS j, ROW_NUMBER() OVER (ORDER BY q.last DESC NULLS LAST, q.created_at DESC, "
        f"q.id DESC) AS rn FROM ({rows}) q ORDER BY rn LIMIT {MAX_KNOWLEDGE_POINTS}"
    )
    total = f"(SELECT COUNT(*) FROM {points})"
    return [
        ("knowledgePoints", d.array(listed)),
        ("knowledgePointsTotal", total),
        ("knowledgePointsTruncated", d.boolean(f"{total} > {MAX_KNOWLEDGE_POINTS}")),
    ]


def _recent(d: Dialect, records: str) -> tuple[str, str]:
    attempt = d.obj(
        ("id", "r.id"),
        ("knowledgePointId", "r.knowledge_point_id"),
        ("knowledgePointName", "k.name"),
        ("isCorrect", d.boolean("r.is_correct")),
        ("score", "r.score"),
        ("durationSeconds", "r.duration_seconds"),
        ("studiedAt", d.iso("r.studied_at")),
    )
    listed = (
        f"SELECT {attempt} AS j, ROW_NUMBER() OVER (ORDER BY r.studied_at DESC, r.id DESC) AS rn "
        f"FROM {records} r JOIN {POINTS} k ON k.id = r.knowledge_point_id ORDER BY rn LIMIT {MAX_RECENT_ATTEMPTS}"
    )
    return ("recentAttempts", d.array(listed))


def _materials(d: Dialect, materials: str) -> list[tuple[str, str]]:
    """materials with excerpts sharing MATERIALS_EXCERPT_BUDGET characters, total, cut."""
    total = f"(SELECT COUNT(*) FROM {materials})"
    shown = d.greatest(d.least(total, str(MAX_MATERIALS)), "1")
    per = d.greatest(
        str(MATERIAL_EXCERPT_MIN_CHARS),
        d.least(str(MATERIAL_EXCERPT_MAX_CHARS), f"{MATERIALS_EXCERPT_BUDGET} / {shown}"),
    )
    excerpt = d.obj(
        ("id", "m.id"),
        ("title", "m.title"),
        ("excerpt", d.left("m.content", "x.per")),
        ("contentLength", "length(m.content)"),
        ("excerptTruncated", d.boolean("length(m.content) > x.per")),
    )
    listed = (
        f"SELECT {excerpt} AS j, ROW_NUMBER() OVER (ORDER BY m.created_at DESC, m.id DESC) AS rn "
        f"FROM {materials} m CROSS JOIN (SELECT {per} AS per) x ORDER BY rn LIMIT {MAX_MATERIALS}"
    )
    return [
        ("materials", d.array(listed)),
        ("materialsTotal", total),
        ("materialsTruncated", d.boolean(f"{total} > {MAX_MATERIALS}")),
    ]


def _base(d: Dialect, base_id: str) -> str:
    """The KnowledgeBase (or null) of the learner with id ``base_id`` (an SQL expression)."""
    return d.sub(
        "SELECT "
        + d.obj(
            ("id", "b.id"),
            ("name", "b.name"),
            ("description", d.left("b.description", str(DESCRIPTION_EXCERPT_CHARS))),
            ("descriptionTruncated", d.boolean(f"length(b.description) > {DESCRIPTION_EXCERPT_CHARS}")),
        )
        + f" FROM {BASES} b WHERE b.user_id = (SELECT uid FROM p) AND b.id = {base_id}"
    )


def _bases(d: Dialect) -> list[tuple[str, str]]:
    """The learner's knowledge bases, newest first, with sizes and results (user target)."""
    summary = d.obj(
        ("id", "b.id"),
        ("name", "b.name"),
        (
            "knowledgePointCount",
            f"(SELECT COUNT(*) FROM {POINTS} k WHERE k.user_id = b.user_id AND k.knowledge_base_id = b.id)",
        ),
        (
            "materialCount",
            f"(SELECT COUNT(*) FROM {MATERIALS} m WHERE m.user_id = b.user_id AND m.knowledge_base_id = b.id)",
        ),
        *_figures(d, "g."),
    )
    grouped = (
        f"SELECT k.knowledge_base_id AS base, {_GROUPED} FROM {RECORDS} r JOIN {POINTS} k ON k.id = r.knowledge_point_id "
        "WHERE r.user_id = (SELECT uid FROM p) AND (SELECT found FROM p) GROUP BY k.knowledge_base_id"
    )
    listed = (
        f"SELECT {summary} AS j, ROW_NUMBER() OVER (ORDER BY b.created_at DESC, b.id DESC) AS rn "
        f"FROM (SELECT * FROM {BASES} WHERE user_id = (SELECT uid FROM p) AND (SELECT found FROM p) "
        f"ORDER BY created_at DESC, id DESC LIMIT {MAX_KNOWLEDGE_BASES}) b LEFT JOIN ({grouped}) g ON g.base = b.id "
        "ORDER BY rn"
    )
    total = f"(SELECT COUNT(*) FROM {BASES} WHERE user_id = (SELECT uid FROM p) AND (SELECT found FROM p))"
    return [
        ("knowledgeBases", d.array(listed)),
        ("knowledgeBasesTotal", total),
        ("knowledgeBasesTruncated", d.boolean(f"{total} > {MAX_KNOWLEDGE_BASES}")),
    ]


def _profile(d: Dialect) -> str:
    profile = d.obj(
        ("goals", "lp.goals"),
        ("level", "lp.level"),
        ("preferredStudyTime", "lp.preferred_study_time"),
        ("preferences", d.json_column("lp.preferences")),
        ("updatedAt", d.iso("lp.updated_at", "+00:00")),
    )
    empty = d.obj(
        ("goals", "''"), ("level", "''"), ("preferredStudyTime", "''"), ("preferences", d.obj()), ("updatedAt", "NULL")
    )
    found = d.sub(f"SELECT {profile} FROM {PROFILES} lp WHERE lp.user_id = (SELECT uid FROM p)")
    return f"COALESCE({found}, {empty})"


# The rows in scope of each target type, as CTEs over ``p`` (uid, tid, found, tz, today):
# ``target`` (the material or point, if the learner's), ``base_id``, ``rec`` (attempts in
# scope), ``pts`` (points in scope), ``mats`` (materials of the base).
_OWN_RECORDS = f"SELECT * FROM {RECORDS} WHERE user_id = (SELECT uid FROM p)"
_SCOPES = {
    "user": (
        f"rec AS ({_OWN_RECORDS} AND (SELECT found FROM p)), "
        f"pts AS (SELECT * FROM {POINTS} WHERE user_id = (SELECT uid FROM p) AND (SELECT found FROM p))"
    ),
    "knowledge_base": (
        f"target AS (SELECT * FROM {BASES} WHERE user_id = (SELECT uid FROM p) AND id = (SELECT tid FROM p)), "
        "base_id AS (SELECT id FROM target), "
        f"rec AS ({_OWN_RECORDS} AND knowledge_point_id IN "
        f"(SELECT id FROM {POINTS} WHERE knowledge_base_id IN (SELECT id FROM base_id))), "
        f"pts AS (SELECT * FROM {POINTS} WHERE user_id = (SELECT uid FROM p) AND knowledge_base_id IN (SELECT id FROM base_id)), "
        f"mats AS (SELECT * FROM {MATERIALS} WHERE user_id = (SELECT uid FROM p) AND knowledge_base_id IN (SELECT id FROM base_id))"
    ),
    "material": (
        f"target AS (SELECT * FROM {MATERIALS} WHERE user_id = (SELECT uid FROM p) AND id = (SELECT tid FROM p)), "
        "base_id AS (SELECT knowledge_base_id AS id FROM target), "
        f"rec AS ({_OWN_RECORDS} AND knowledge_point_id IN "
        f"(SELECT id FROM {POINTS} WHERE knowledge_base_id IN (SELECT id FROM base_id))), "
        f"pts AS (SELECT * FROM {POINTS} WHERE user_id = (SELECT uid FROM p) AND knowledge_base_id IN (SELECT id FROM base_id))"
    ),
    "knowledge_point": (
        f"target AS (SELECT * FROM {POINTS} WHERE user_id = (SELECT uid FROM p) AND id = (SELECT tid FROM p)), "
        "base_id AS (SELECT knowledge_base_id AS id FROM target), "
        f"rec AS ({_OWN_RECORDS} AND knowledge_point_id IN (SELECT id FROM target)), "
        f"pts AS (SELECT * FROM {POINTS} WHERE user_id = (SELECT uid FROM p) AND knowledge_base_id IN (SELECT id FROM base_id)), "
        f"mats AS (SELECT * FROM {MATERIALS} WHERE user_id = (SELECT uid FROM p) AND knowledge_base_id IN (SELECT id FROM base_id))"
    ),
}


def _document(d: Dialect, target_type: str) -> list[tuple[str, str]]:
    """The target type's part of the document (after learner, target, version, time, zone)."""
    found = "(SELECT found FROM p)" if target_type == "user" else "EXISTS (SELECT 1 FROM target)"
    stats = f"CASE WHEN {found} THEN {_stats(d, 'rec')} END"
    base = _base(d, "(SELECT id FROM base_id)")
    if target_type == "user":
        return [("targetFound", d.boolean(found)), ("stats", stats), *_bases(d), *_points(d, "pts"), _recent(d, "rec")]
    if target_type == "knowledge_base":
        return [
            ("targetFound", d.boolean(found)),
            ("knowledgeBase", base),
            ("stats", stats),
            *_points(d, "pts"),
            *_materials(d, "mats"),
            _recent(d, "rec"),
        ]
    if target_type == "material":
        material = d.sub(
            "SELECT "
            + d.obj(
                ("id", "t.id"),
                ("knowledgeBaseId", "t.knowledge_base_id"),
                ("title", "t.title"),
                ("content", d.left("t.content", str(MATERIAL_CONTENT_CHARS))),
                ("contentLength", "length(t.content)"),
                ("contentTruncated", d.boolean(f"length(t.content) > {MATERIAL_CONTENT_CHARS}")),
                ("createdAt", d.iso("t.created_at")),
                ("updatedAt", d.iso("t.updated_at")),
            )
            + " FROM target t"
        )
        return [
            ("targetFound", d.boolean(found)),
            ("material", material),
            ("knowledgeBase", base),
            ("stats", stats),
            *_points(d, "pts"),
            _recent(d, "rec"),
        ]
    point_rows = _WITH_FIGURES.format(grouped=_GROUPED, points="target")
    point = d.sub(f"SELECT {_point(d, 'q')} FROM ({point_rows}) q")
    return [
        ("targetFound", d.boolean(found)),
        ("knowledgePoint", point),
        ("knowledgeBase", base),
        ("stats", stats),
        *_points(d, "pts"),
        *_materials(d, "mats"),
        _recent(d, "rec"),
    ]


@cache
def statement(vendor: str, target_type: str) -> str:
    """The statement of a target type: parameters, in their order in its text, user id,
    target id, found (user target), timezone, today (local date), then learner, target
    (JSON text) and generated at."""
    d = Dialect(postgres=vendor == "postgresql")
    found = "CAST(%s AS BOOLEAN)" if d.postgres else "CAST(%s AS INTEGER)"
    text = "CAST(%s AS json)" if d.postgres else "json(%s)"
    params = (
        f"p AS (SELECT CAST(%s AS INTEGER) AS uid, CAST(%s AS TEXT) AS tid, {found} AS found, "
        f"CAST(%s AS TEXT) AS tz, {d.today()} AS today), "
        f"own AS ({_OWN_RECORDS})"
    )
    document = d.obj(
        ("learner", text),
        ("target", text),
        ("learningSnapshotVersion", f"'{LEARNING_SNAPSHOT_VERSION}'"),
        ("generatedAt", "CAST(%s AS TEXT)"),
        ("timezone", "(SELECT tz FROM p)"),
        ("profile", _profile(d)),
        ("overall", _stats(d, "own")),
        *_document(d, target_type),
    )
    cast = "::text" if d.postgres else ""
    return f"WITH {params}, {_SCOPES[target_type]} SELECT ({document}){cast}"


def snapshot_document(
    *,
    user_id: int,
    target_type: str,
    target_id: str,
    found: bool,
    timezone_name: str,
    today: dt.date,
    generated_at: str,
    learner_json: str,
    target_json: str,
) -> str:
    """The snapshot's ``data`` as JSON text, built by the database in one statement."""
    # The order of the %s: learner and target are the document's first values, but p's
    # parameters come first in the statement's text.
    sql = statement(connection.vendor, target_type)
    values: list[Any] = [user_id, str(target_id), found, timezone_name, today.isoformat()]
    values += [learner_json, target_json, generated_at]
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        return cursor.fetchone()[0]
