"""What a job's result becomes (contract §5, seed 002 v1.1 ``persistResult``).

``result_persist`` runs inside the result's transaction (``services.result_submit``):
the records are written there, all of a kind in one ``bulk_create``, and the
user's notification is enqueued only once that transaction commits. A result that
is rolled back leaves no record and sends no notice.

Quiz and flashcard outputs are stored as candidates and then published into the
job's knowledge base (``convertQuizCandidates`` / ``convertFlashcardCandidates``).
A candidate whose normalised stem (front) the knowledge base already has, or that
an earlier candidate of the same output already published, is skipped and marked
``duplicate``. The knowledge base's existing texts are fetched in ONE query for the
whole output, never one per candidate. The knowledge base row is locked for the
rest of the transaction (``FOR NO KEY UPDATE``), so two results publishing into
the same knowledge base take turns and it cannot be deleted under them; the unique
``(knowledge_base, key)`` constraint with ``ON CONFLICT DO NOTHING`` settles any
writer that does not take that lock, and a check of what actually went in decides
each candidate's status.

Nothing the model wrote is trusted as a reference: a ``knowledgePointId`` that is
not one of the job's user's knowledge points is stored as null, and so is a
recommendation's ``targetType``/``targetId`` that does not name the user or one of
their objects.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Model, QuerySet

from ai_jobs.models import (
    AiLearningAnalysis,
    AiRuntimeJob,
    AiRuntimeResult,
    CandidateStatus,
    Flashcard,
    FlashcardCandidate,
    JobType,
    NextActionRecommendation,
    QuizQuestion,
    QuizQuestionCandidate,
    TargetType,
    WeakPointCandidate,
)
from ai_jobs.notifications import notify_after_commit
from config.ids import new_id
from learning.models import KnowledgeBase, KnowledgePoint, Material

# --- normalisation -------------------------------------------------------------------------


_TRAILING_PUNCTUATION = frozenset(".,;:!?…。、؟।‽")


def normalize_text(text: str) -> str:
    """The form in which two quiz stems (flashcard fronts) count as the same:

    1. Unicode NFKC (full-width letters, digits and punctuation become ASCII,
       ligatures and compatibility forms are folded), then ``casefold()``
       (``Straße`` → ``strasse``), then NFKC again, since case folding can leave
       a non-normalised sequence;
    2. every run of Unicode whitespace (tabs, newlines, ideographic spaces)
       becomes one space, and leading/trailing whitespace goes;
    3. trailing sentence punctuation (``. , ; : ! ? …``, the full-width forms
       NFKC already turned into these, and ``。 、 ؟ । ‽``) and whitespace are
       stripped from the end. Other marks (``% ) " =``) are part of the text.

    ``"  What is  1/2 + 1/4 ?"`` and ``"what is 1/2 + 1/4"`` are the same question.
    """
    text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    text = " ".join(text.split())
    end = len(text)
    while end and (text[end - 1].isspace() or text[end - 1] in _TRAILING_PUNCTUATION):
        end -= 1
    return text[:end]


def text_key(normalized: str) -> str:
    """What the unique constraint holds: SHA-256 of the normalised text."""
    return hashlib.sha256(normalized.encode()).hexdigest()


# --- the seam --------------------------------------------------------------------------------


def result_persist(*, job: AiRuntimeJob, result: AiRuntimeResult) -> None:
    """Turn an accepted result into the job type's records, inside the result's
    transaction, and notify the user once it commits."""
    _PERSIST[job.job_type](job, result.output, result)
    notify_after_commit(job.id)


def _ordered_ids(prefix: str, count: int) -> list[str]:
    """``count`` fresh ids, the largest first: the rows of one result share their
    ``created_at``, and the lists' ``-created_at, -id`` order then shows them in the
    order of the output."""
    return sorted((new_id(prefix) for _ in range(count)), reverse=True)


def _base(job: AiRuntimeJob, result: AiRuntimeResult) -> dict[str, Any]:
    return {
        "user_id": job.user_id,
        "job_id": job.id,
        "target_type": job.target_type,
        "target_id": job.target_id,
        "created_at": result.created_at,
    }


def _own_points(job: AiRuntimeJob, ids: Iterable[str | None]) -> set[str]:
    """Which of ``ids`` are the job's user's knowledge points (one query, or none)."""
    wanted = {point_id for point_id in ids if point_id}
    if not wanted:
        return set()
    return set(KnowledgePoint.objects.filter(user_id=job.user_id, id__in=wanted).values_list("id", flat=True))


def _point(entry: dict[str, Any], own: set[str]) -> str | None:
    point_id = entry.get("knowledgePointId")
    return point_id if point_id in own else None


# --- analysis, weak points, recommendations ----------------------------------------------------


def _persist_analysis(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> None:
    AiLearningAnalysis.objects.bulk_create(
        [
            AiLearningAnalysis(
                **_base(job, result),
                summary=output["summary"],
                mastery_score=output["masteryScore"],
                level=output["level"],
                strengths=output["strengths"],
                weaknesses=output["weaknesses"],
                confidence=output["confidence"],
            )
        ]
    )


def _persist_weak_points(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> None:
    entries = output["weakPoints"]
    own = _own_points(job, (entry.get("knowledgePointId") for entry in entries))
    ids = _ordered_ids("weak", len(entries))
    WeakPointCandidate.objects.bulk_create(
        WeakPointCandidate(
            **_base(job, result),
            id=ids[position],
            position=position,
            knowledge_point_id=_point(entry, own),
            title=entry["title"],
            reason=entry["reason"],
            severity=entry["severity"],
            evidence=entry["evidence"],
            confidence=entry["confidence"],
        )
        for position, entry in enumerate(entries)
    )


_OWNED_TARGETS: dict[str, type[Model]] = {
    TargetType.MATERIAL: Material,
    TargetType.KNOWLEDGE_POINT: KnowledgePoint,
    TargetType.KNOWLEDGE_BASE: KnowledgeBase,
}


def _own_targets(job: AiRuntimeJob, entries: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
    """The ``(targetType, targetId)`` pairs of ``entries`` that name one of the
    user's objects: one query per target type named, not per entry."""
    wanted: dict[str, set[str]] = {}
    for entry in entries:
        target_type, target_id = entry.get("targetType"), entry.get("targetId")
        if target_type in _OWNED_TARGETS and target_id:
            wanted.setdefault(target_type, set()).add(target_id)
    return {
        (target_type, object_id)
        for target_type, object_ids in wanted.items()
        for object_id in _OWNED_TARGETS[target_type]
        ._default_manager.filter(user_id=job.user_id, id__in=object_ids)
        .values_list("id", flat=True)
    }


def _action_target(
    job: AiRuntimeJob, entry: dict[str, Any], own: set[tuple[str, str]]
) -> tuple[str | None, str | None]:
    target_type, target_id = entry.get("targetType"), entry.get("targetId")
    if target_type == TargetType.USER and target_id in (None, str(job.user_id)):
        return target_type, str(job.user_id)
    if (target_type, target_id) in own:
        return target_type, target_id
    return None, None


def _persist_recommendations(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> None:
    entries = output["recommendations"]
    own = _own_targets(job, entries)
    ids = _ordered_ids("rcm", len(entries))
    rows = []
    for position, entry in enumerate(entries):
        action_target_type, action_target_id = _action_target(job, entry, own)
        rows.append(
            NextActionRecommendation(
                **_base(job, result),
                id=ids[position],
                position=position,
                action_type=entry["actionType"],
                title=entry["title"],
                description=entry["description"],
                priority=entry["priority"],
                estimated_minutes=entry["estimatedMinutes"],
                action_target_type=action_target_type,
                action_target_id=action_target_id,
            )
        )
    NextActionRecommendation.objects.bulk_create(rows)


# --- quiz questions and flashcards: candidates, then published --------------------------------


def _knowledge_base_locked(job: AiRuntimeJob) -> KnowledgeBase | None:
    """The job's knowledge base if it is still the user's, locked until commit."""
    if job.target_type != TargetType.KNOWLEDGE_BASE:
        return None
    return (
        KnowledgeBase.objects.select_for_update(no_key=True)
        .filter(id=job.target_id, user_id=job.user_id)
        .only("id")
        .first()
    )


def _publish(
    *,
    model: type[QuizQuestion] | type[Flashcard],
    key_field: str,
    prefix: str,
    knowledge_base: KnowledgeBase,
    keys: Sequence[str],
    build: Callable[[int, str], Model],
) -> list[tuple[str, str | None]]:
    """Publish the entries whose key the knowledge base lacks, the first of each key
    only. Returns, per entry, ``(status, id of the published row)``."""
    existing = dict(
        model.objects.filter(knowledge_base=knowledge_base, **{f"{key_field}__in": set(keys)}).values_list(
            key_field, "id"
        )
    )  # the one prefetch for the whole output
    first_of_key: dict[str, int] = {}
    for position, key in enumerate(keys):
        if key not in existing:
            first_of_key.setdefault(key, position)
    ids = _ordered_ids(prefix, len(first_of_key))
    rows = [build(position, ids[n]) for n, position in enumerate(first_of_key.values())]
    mine: dict[str, str] = {}
    if rows:
        # Inserted in key order, so two transactions publishing overlapping keys wait
        # for each other in the same order and never deadlock.
        rows.sort(key=lambda row: getattr(row, key_field))
        model.objects.bulk_create(rows, ignore_conflicts=True)
        # Who holds each key now: this transaction, or a writer that got there first.
        holders = dict(
            model.objects.filter(knowledge_base=knowledge_base, **{f"{key_field}__in": list(first_of_key)}).values_list(
                key_field, "id"
            )
        )
        existing.update(holders)
        mine = {getattr(row, key_field): row.pk for row in rows if holders.get(getattr(row, key_field)) == row.pk}
    outcome: list[tuple[str, str | None]] = []
    for position, key in enumerate(keys):
        published = key in mine and first_of_key.get(key) == position
        outcome.append((CandidateStatus.PUBLISHED if published else CandidateStatus.DUPLICATE, existing.get(key)))
    return outcome


def _persist_quiz(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> None:
    entries = output["questions"]
    base = _base(job, result)
    knowledge_base = _knowledge_base_locked(job)
    own = _own_points(job, (entry.get("knowledgePointId") for entry in entries))
    normalized = [normalize_text(entry["stem"]) for entry in entries]
    keys = [text_key(text) for text in normalized]

    def question(position: int, question_id: str) -> QuizQuestion:
        entry = entries[position]
        return QuizQuestion(
            **base,
            id=question_id,
            knowledge_base=knowledge_base,
            knowledge_point_id=_point(entry, own),
            question_type=entry["questionType"],
            stem=entry["stem"],
            normalized_stem=normalized[position],
            stem_key=keys[position],
            options=entry["options"],
            answer=entry["answer"],
            explanation=entry["explanation"],
            difficulty=entry["difficulty"],
        )

    outcome: list[tuple[str, str | None]] = [(CandidateStatus.NO_KNOWLEDGE_BASE, None)] * len(entries)
    if knowledge_base is not None:
        outcome = _publish(
            model=QuizQuestion,
            key_field="stem_key",
            prefix="qq",
            knowledge_base=knowledge_base,
            keys=keys,
            build=question,
        )
    ids = _ordered_ids("qqc", len(entries))
    QuizQuestionCandidate.objects.bulk_create(
        QuizQuestionCandidate(
            **base,
            id=ids[position],
            position=position,
            knowledge_base=knowledge_base,
            knowledge_point_id=_point(entry, own),
            question_type=entry["questionType"],
            stem=entry["stem"],
            normalized_stem=normalized[position],
            options=entry["options"],
            answer=entry["answer"],
            explanation=entry["explanation"],
            difficulty=entry["difficulty"],
            status=outcome[position][0],
            question_id=outcome[position][1],
        )
        for position, entry in enumerate(entries)
    )


def _persist_flashcards(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> None:
    entries = output["flashcards"]
    base = _base(job, result)
    knowledge_base = _knowledge_base_locked(job)
    own = _own_points(job, (entry.get("knowledgePointId") for entry in entries))
    normalized = [normalize_text(entry["front"]) for entry in entries]
    keys = [text_key(text) for text in normalized]

    def card(position: int, card_id: str) -> Flashcard:
        entry = entries[position]
        return Flashcard(
            **base,
            id=card_id,
            knowledge_base=knowledge_base,
            knowledge_point_id=_point(entry, own),
            front=entry["front"],
            normalized_front=normalized[position],
            front_key=keys[position],
            back=entry["back"],
            hint=entry.get("hint"),
            tags=entry.get("tags") or [],
        )

    outcome: list[tuple[str, str | None]] = [(CandidateStatus.NO_KNOWLEDGE_BASE, None)] * len(entries)
    if knowledge_base is not None:
        outcome = _publish(
            model=Flashcard, key_field="front_key", prefix="fc", knowledge_base=knowledge_base, keys=keys, build=card
        )
    ids = _ordered_ids("fcc", len(entries))
    FlashcardCandidate.objects.bulk_create(
        FlashcardCandidate(
            **base,
            id=ids[position],
            position=position,
            knowledge_base=knowledge_base,
            knowledge_point_id=_point(entry, own),
            front=entry["front"],
            normalized_front=normalized[position],
            back=entry["back"],
            hint=entry.get("hint"),
            tags=entry.get("tags") or [],
            status=outcome[position][0],
            flashcard_id=outcome[position][1],
        )
        for position, entry in enumerate(entries)
    )


_PERSIST: dict[str, Callable[[AiRuntimeJob, dict[str, Any], AiRuntimeResult], None]] = {
    JobType.LEARNING_STATE_ANALYSIS: _persist_analysis,
    JobType.WEAK_POINT_ANALYSIS: _persist_weak_points,
    JobType.NEXT_ACTION_PLANNING: _persist_recommendations,
    JobType.QUIZ_GENERATION: _persist_quiz,
    JobType.FLASHCARD_GENERATION: _persist_flashcards,
}


# --- reads (the user API), owner-scoped, newest first is the paginator's order ------------------


def record_list(
    *,
    model: type[Model],
    user: AbstractBaseUser,
    target_type: str | None = None,
    target_id: str | None = None,
    job_id: str | None = None,
) -> QuerySet[Any]:
    """The user's records of one kind; a published question or card is listed under
    the job that published it."""
    records = model._default_manager.filter(user=user)
    if target_type is not None:
        records = records.filter(target_type=target_type)
    if target_id is not None:
        records = records.filter(target_id=target_id)
    if job_id is not None:
        records = records.filter(job_id=job_id)
    return records
