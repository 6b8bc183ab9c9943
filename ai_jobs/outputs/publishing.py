"""How quiz questions and flashcards are stored (contract §5, seed 002 v1.1
``convertQuizCandidates`` / ``convertFlashcardCandidates``): the output's entries as
candidates, as the model wrote them, then published into the job's knowledge base.

A candidate whose normalised stem (front) the knowledge base already has, or that
an earlier candidate of the same output already published, is skipped and marked
``duplicate``. The knowledge base's existing texts are fetched in ONE query for the
whole output, never one per candidate. The knowledge base row is locked for the
rest of the transaction (``FOR NO KEY UPDATE``), so two results publishing into
the same knowledge base take turns and it cannot be deleted under them; the unique
``(knowledge_base, key)`` constraint with ``ON CONFLICT DO NOTHING`` settles any
writer that does not take that lock, and a check of what actually went in decides
each candidate's status. (The digest of the normalised text, not the text, is
unique: a btree entry of 2,000 CJK characters would pass PostgreSQL's size limit.)
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Model

from ai_jobs.models import (
    AiRuntimeJob,
    AiRuntimeResult,
    CandidateStatus,
    Flashcard,
    FlashcardCandidate,
    QuizQuestion,
    QuizQuestionCandidate,
    TargetType,
)
from ai_jobs.outputs.common import base_fields, ordered_ids, own_points, point
from learning.models import KnowledgeBase

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


# --- candidates, then published --------------------------------------------------------


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
    ids = ordered_ids(prefix, len(first_of_key))
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


@dataclass(frozen=True)
class Publication:
    """How one kind of entry is published: which output list holds the entries,
    which text of an entry must be unique per knowledge base, the published model and
    its candidates', and the fields both take from an entry."""

    entries: str  # the output's key: "questions"
    text: str  # the entry's key whose normalised form is unique: "stem"
    model: type[QuizQuestion] | type[Flashcard]
    prefix: str
    candidate: type[QuizQuestionCandidate] | type[FlashcardCandidate]
    candidate_prefix: str
    link: str  # the candidate's reference to the row it published or duplicates
    fields: Callable[[dict[str, Any]], dict[str, Any]]

    @property
    def normalized_field(self) -> str:
        return f"normalized_{self.text}"

    @property
    def key_field(self) -> str:
        return f"{self.text}_key"


def store_published(
    publication: Publication, job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult
) -> None:
    """The entries as candidates, each with what became of it: published, a
    duplicate (with the row it duplicates), or nowhere to go (the knowledge base is gone)."""
    entries = output[publication.entries]
    base = base_fields(job, result)
    knowledge_base = _knowledge_base_locked(job)
    own = own_points(job, (entry.get("knowledgePointId") for entry in entries))
    normalized = [normalize_text(entry[publication.text]) for entry in entries]
    keys = [text_key(text) for text in normalized]

    def published(position: int, row_id: str) -> Model:
        entry = entries[position]
        return publication.model(
            **base,
            id=row_id,
            knowledge_base=knowledge_base,
            knowledge_point_id=point(entry, own),
            **{publication.normalized_field: normalized[position], publication.key_field: keys[position]},
            **publication.fields(entry),
        )

    outcome: list[tuple[str, str | None]] = [(CandidateStatus.NO_KNOWLEDGE_BASE, None)] * len(entries)
    if knowledge_base is not None:
        outcome = _publish(
            model=publication.model,
            key_field=publication.key_field,
            prefix=publication.prefix,
            knowledge_base=knowledge_base,
            keys=keys,
            build=published,
        )
    ids = ordered_ids(publication.candidate_prefix, len(entries))
    publication.candidate.objects.bulk_create(
        publication.candidate(
            **base,
            id=ids[position],
            position=position,
            knowledge_base=knowledge_base,
            knowledge_point_id=point(entry, own),
            **{publication.normalized_field: normalized[position]},
            **publication.fields(entry),
            status=outcome[position][0],
            **{publication.link: outcome[position][1]},
        )
        for position, entry in enumerate(entries)
    )


QUESTIONS = Publication(
    entries="questions",
    text="stem",
    model=QuizQuestion,
    prefix="qq",
    candidate=QuizQuestionCandidate,
    candidate_prefix="qqc",
    link="question_id",
    fields=lambda entry: {
        "question_type": entry["questionType"],
        "stem": entry["stem"],
        "options": entry["options"],
        "answer": entry["answer"],
        "explanation": entry["explanation"],
        "difficulty": entry["difficulty"],
    },
)

FLASHCARDS = Publication(
    entries="flashcards",
    text="front",
    model=Flashcard,
    prefix="fc",
    candidate=FlashcardCandidate,
    candidate_prefix="fcc",
    link="flashcard_id",
    fields=lambda entry: {
        "front": entry["front"],
        "back": entry["back"],
        "hint": entry.get("hint"),
        "tags": entry.get("tags") or [],
    },
)


def store_quiz(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> None:
    store_published(QUESTIONS, job, output, result)


def store_flashcards(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> None:
    store_published(FLASHCARDS, job, output, result)
