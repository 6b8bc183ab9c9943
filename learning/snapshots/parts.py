"""The parts the snapshot builders are made of: learner statistics and streaks,
knowledge points with their mastery, materials with excerpts, knowledge base
summaries. Each runs a fixed number of queries whatever the size of the learner's
data: per-group figures are one grouped query, every list is sliced, and long
texts are cut in the database (``Left``) before they reach Python.

The bounds and labels below are the document's (learning/SNAPSHOT.md); PostgreSQL's
statements in ``learning.queries`` write the same ones: change both."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.apps import apps
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import FieldError
from django.db.models import Avg, Count, F, Max, Min, Q, QuerySet, Sum
from django.db.models.functions import Left, Length, TruncDate

from learning import selectors
from learning.models import KnowledgeBase, KnowledgePoint, Material, StudyRecord

LEARNING_SNAPSHOT_VERSION = "v2"  # v2: pseudonymous (learning/SNAPSHOT.md)

MAX_KNOWLEDGE_BASES = 50
MAX_KNOWLEDGE_POINTS = 200
MAX_RECENT_ATTEMPTS = 50
MAX_MATERIALS = 30
DESCRIPTION_EXCERPT_CHARS = 500
MATERIAL_CONTENT_CHARS = 20_000  # the material a job targets
MATERIALS_EXCERPT_BUDGET = 40_000  # all excerpts of a knowledge base's materials together
MATERIAL_EXCERPT_MIN_CHARS = 1_000
MATERIAL_EXCERPT_MAX_CHARS = 8_000

# Mastery labels (SNAPSHOT.md): below WEAK is weak; MASTERED needs the accuracy and
# enough attempts to trust it.
WEAK_ACCURACY = 0.6
MASTERED_ACCURACY = 0.85
MASTERED_MIN_ATTEMPTS = 3

UTC = ZoneInfo("UTC")


# --- helpers -----------------------------------------------------------------------------------


def iso(value: dt.datetime | None) -> str | None:
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z") if value else None


def ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def rounded(value: float | None, digits: int = 2) -> float | None:
    return round(float(value), digits) if value is not None else None


def zone_named(name: str | None) -> ZoneInfo:
    """The zone of an IANA name; UTC when unset or unknown."""
    try:
        return ZoneInfo(name) if name else UTC
    except (ValueError, ZoneInfoNotFoundError):
        return UTC


def learner_timezone(user: AbstractBaseUser) -> ZoneInfo:
    """The learner's IANA timezone, which decides their local dates: the one they set
    in ``/ai/settings``, read from the quotas app's per-user settings when that model
    exists; UTC otherwise or when unset."""
    try:
        model = apps.get_model("quotas", "UserAiSettings")
        return zone_named(model.objects.filter(user=user).values_list("timezone", flat=True).first())
    except (LookupError, FieldError):
        return UTC


def streaks(days: list[dt.date], today: dt.date) -> tuple[int, int]:
    """(current, longest) runs of consecutive study days. ``days`` ascending and
    distinct. The current streak is alive if the last study day is today or
    yesterday: a learner who has not studied yet today has not broken it."""
    longest = run = 0
    previous: dt.date | None = None
    for day in days:
        run = run + 1 if previous is not None and day - previous == dt.timedelta(days=1) else 1
        longest = max(longest, run)
        previous = day
    current = run if previous is not None and (today - previous).days <= 1 else 0
    return current, longest


def study_stats(records: QuerySet[StudyRecord], *, tz: ZoneInfo, now: dt.datetime) -> dict[str, Any]:
    """Totals, accuracy, score and streaks of a set of attempts: the totals in one
    aggregate, the distinct local study days in one query, the streaks over those."""
    totals = records.aggregate(
        attempts=Count("id"),
        correct=Count("id", filter=Q(is_correct=True)),
        average_score=Avg("score"),
        seconds=Sum("duration_seconds"),
        first=Min("studied_at"),
        last=Max("studied_at"),
        points=Count("knowledge_point", distinct=True),
    )
    days = list(
        records.annotate(day=TruncDate("studied_at", tzinfo=tz))
        .order_by("day")
        .values_list("day", flat=True)
        .distinct()
    )
    current, longest = streaks(days, now.astimezone(tz).date())
    return {
        "attemptCount": totals["attempts"],
        "correctCount": totals["correct"],
        "accuracy": ratio(totals["correct"], totals["attempts"]),
        "averageScore": rounded(totals["average_score"]),
        "totalStudySeconds": totals["seconds"] or 0,
        "knowledgePointsStudied": totals["points"],
        "firstStudiedAt": iso(totals["first"]),
        "lastStudiedAt": iso(totals["last"]),
        "studyDays": len(days),
        "currentStreakDays": current,
        "longestStreakDays": longest,
    }


def mastery_label(attempts: int, accuracy: float | None) -> str:
    if not attempts or accuracy is None:
        return "not_started"
    if accuracy < WEAK_ACCURACY:
        return "weak"
    if accuracy >= MASTERED_ACCURACY and attempts >= MASTERED_MIN_ATTEMPTS:
        return "mastered"
    return "developing"


def with_mastery(points: QuerySet[KnowledgePoint]) -> QuerySet[KnowledgePoint]:
    return points.annotate(
        attempt_count=Count("study_records"),
        correct_count=Count("study_records", filter=Q(study_records__is_correct=True)),
        average_score=Avg("study_records__score"),
        total_seconds=Sum("study_records__duration_seconds"),
        last_studied_at=Max("study_records__studied_at"),
        description_excerpt=Left("description", DESCRIPTION_EXCERPT_CHARS),
        description_length=Length("description"),
    )


def point_data(row: dict[str, Any]) -> dict[str, Any]:
    attempts = row["attempt_count"]
    accuracy = ratio(row["correct_count"], attempts)
    return {
        "id": row["id"],
        "knowledgeBaseId": row["knowledge_base_id"],
        "name": row["name"],
        "description": row["description_excerpt"],
        "descriptionTruncated": row["description_length"] > DESCRIPTION_EXCERPT_CHARS,
        "mastery": {
            "attemptCount": attempts,
            "correctCount": row["correct_count"],
            "accuracy": accuracy,
            "averageScore": rounded(row["average_score"]),
            "totalStudySeconds": row["total_seconds"] or 0,
            "lastStudiedAt": iso(row["last_studied_at"]),
            "level": mastery_label(attempts, accuracy),
        },
    }


POINT_FIELDS = (
    "id",
    "knowledge_base_id",
    "name",
    "description_excerpt",
    "description_length",
    "attempt_count",
    "correct_count",
    "average_score",
    "total_seconds",
    "last_studied_at",
)


def knowledge_points_data(points: QuerySet[KnowledgePoint]) -> dict[str, Any]:
    """At most MAX_KNOWLEDGE_POINTS points with their mastery, most recently studied
    first and never-studied ones last: one grouped query, and a count only when the
    list is full."""
    rows = list(
        with_mastery(points)
        .order_by(F("last_studied_at").desc(nulls_last=True), "-created_at", "-id")
        .values(*POINT_FIELDS)[:MAX_KNOWLEDGE_POINTS]
    )
    total = points.count() if len(rows) == MAX_KNOWLEDGE_POINTS else len(rows)
    return {
        "knowledgePoints": [point_data(row) for row in rows],
        "knowledgePointsTotal": total,
        "knowledgePointsTruncated": total > len(rows),
    }


def recent_attempts(records: QuerySet[StudyRecord]) -> list[dict[str, Any]]:
    rows = records.order_by("-studied_at", "-id").values(
        "id", "knowledge_point_id", "knowledge_point__name", "is_correct", "score", "duration_seconds", "studied_at"
    )[:MAX_RECENT_ATTEMPTS]
    return [
        {
            "id": row["id"],
            "knowledgePointId": row["knowledge_point_id"],
            "knowledgePointName": row["knowledge_point__name"],
            "isCorrect": row["is_correct"],
            "score": row["score"],
            "durationSeconds": row["duration_seconds"],
            "studiedAt": iso(row["studied_at"]),
        }
        for row in rows
    ]


def materials_data(materials: QuerySet[Material]) -> dict[str, Any]:
    """At most MAX_MATERIALS materials, newest first, with excerpts that share
    MATERIALS_EXCERPT_BUDGET characters (counted first, to know how many share it)."""
    total = materials.count()
    shown = min(total, MAX_MATERIALS)
    per = max(MATERIAL_EXCERPT_MIN_CHARS, min(MATERIAL_EXCERPT_MAX_CHARS, MATERIALS_EXCERPT_BUDGET // max(shown, 1)))
    rows = (
        materials.annotate(excerpt=Left("content", per), content_length=Length("content"))
        .order_by("-created_at", "-id")
        .values("id", "title", "excerpt", "content_length")[:MAX_MATERIALS]
    )
    return {
        "materials": [
            {
                "id": row["id"],
                "title": row["title"],
                "excerpt": row["excerpt"],
                "contentLength": row["content_length"],
                "excerptTruncated": row["content_length"] > per,
            }
            for row in rows
        ],
        "materialsTotal": total,
        "materialsTruncated": total > shown,
    }


def knowledge_base_data(user: AbstractBaseUser, knowledge_base_id: str) -> dict[str, Any] | None:
    row = (
        KnowledgeBase.objects.filter(user=user, id=knowledge_base_id)
        .annotate(
            description_excerpt=Left("description", DESCRIPTION_EXCERPT_CHARS),
            description_length=Length("description"),
        )
        .values("id", "name", "description_excerpt", "description_length")
        .first()
    )
    if row is None:
        return None
    return {
        "id": row["id"],
        "name": row["name"],
        "description": row["description_excerpt"],
        "descriptionTruncated": row["description_length"] > DESCRIPTION_EXCERPT_CHARS,
    }


def common(user: AbstractBaseUser, *, tz: ZoneInfo, now: dt.datetime) -> dict[str, Any]:
    """What every snapshot carries: version, time, timezone, profile, overall stats."""
    return {
        "learningSnapshotVersion": LEARNING_SNAPSHOT_VERSION,
        "generatedAt": iso(now),
        "timezone": tz.key,
        "profile": selectors.learning_profile_data(user=user),
        "overall": study_stats(StudyRecord.objects.filter(user=user), tz=tz, now=now),
    }


def empty_lists(*names: str) -> dict[str, Any]:
    empty: dict[str, Any] = {}
    for name in names:
        empty.update({name: [], f"{name}Total": 0, f"{name}Truncated": False})
    return empty


def knowledge_bases_data(user: AbstractBaseUser) -> dict[str, Any]:
    """The learner's knowledge bases, newest first, with their sizes and results:
    the listed bases, then their points, materials and attempts each counted in one
    query grouped by knowledge base, and the total only when the list is cut."""
    bases = list(
        KnowledgeBase.objects.filter(user=user)
        .order_by("-created_at", "-id")
        .values("id", "name")[: MAX_KNOWLEDGE_BASES + 1]
    )
    truncated = len(bases) > MAX_KNOWLEDGE_BASES
    bases = bases[:MAX_KNOWLEDGE_BASES]
    ids = [base["id"] for base in bases]
    points = dict(
        KnowledgePoint.objects.filter(user=user, knowledge_base_id__in=ids)
        .values("knowledge_base_id")
        .annotate(n=Count("id"))
        .values_list("knowledge_base_id", "n")
    )
    materials = dict(
        Material.objects.filter(user=user, knowledge_base_id__in=ids)
        .values("knowledge_base_id")
        .annotate(n=Count("id"))
        .values_list("knowledge_base_id", "n")
    )
    results = {
        row["knowledge_point__knowledge_base_id"]: row
        for row in StudyRecord.objects.filter(user=user, knowledge_point__knowledge_base_id__in=ids)
        .values("knowledge_point__knowledge_base_id")
        .annotate(
            attempts=Count("id"),
            correct=Count("id", filter=Q(is_correct=True)),
            average_score=Avg("score"),
            seconds=Sum("duration_seconds"),
            last=Max("studied_at"),
        )
    }
    summaries = []
    for base in bases:
        result = results.get(base["id"], {})
        attempts = result.get("attempts", 0)
        summaries.append(
            {
                "id": base["id"],
                "name": base["name"],
                "knowledgePointCount": points.get(base["id"], 0),
                "materialCount": materials.get(base["id"], 0),
                "attemptCount": attempts,
                "accuracy": ratio(result.get("correct", 0), attempts),
                "averageScore": rounded(result.get("average_score")),
                "totalStudySeconds": result.get("seconds") or 0,
                "lastStudiedAt": iso(result.get("last")),
            }
        )
    total = KnowledgeBase.objects.filter(user=user).count() if truncated else len(bases)
    return {"knowledgeBases": summaries, "knowledgeBasesTotal": total, "knowledgeBasesTruncated": truncated}
