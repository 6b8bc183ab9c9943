"""How quiz questions and flashcards are stored: the output's entries as
candidates, as the model wrote them, then published into the job's knowledge base.

A candidate whose normalised stem (front) the knowledge base already has, or that
an earlier candidate of the same output already published, is skipped and marked
``duplicate``. The whole output's texts are offered in ONE insert, and the holders
of those already taken read in one more statement, never one per candidate. The knowledge base row is locked for the
rest of the transaction (``FOR NO KEY UPDATE``), so two results publishing into
the same knowledge base take turns and it cannot be deleted under them; the unique
``(knowledge_base, key)`` constraint with ``ON CONFLICT DO NOTHING`` settles any
writer that does not take that lock, and a check of what actually went in decides
each candidate's status. (The digest of the normalised text, not the text, is
unique: a btree entry of a long CJK text would pass PostgreSQL's size limit.)
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from ai_jobs import queries
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
from ai_jobs.outputs.common import Stored, base_fields, ordered_ids, own_points, point
from config.sql import fetch, insert_rows
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
    """The job's knowledge base (its id only) if it is still the user's, locked until
    commit (SQLite has no row locks: its writers take turns for the whole database)."""
    if job.target_type != TargetType.KNOWLEDGE_BASE:
        return None
    if connection.vendor == "postgresql":
        rows = fetch(queries.KNOWLEDGE_BASE_LOCKED, {"knowledge_base_id": job.target_id, "user_id": job.user_id})
        found = rows[0][0] if rows else None
    else:
        found = KnowledgeBase.objects.filter(id=job.target_id, user_id=job.user_id).values_list("id", flat=True).first()
    return KnowledgeBase(id=found, user_id=job.user_id) if found is not None else None


def _publish(
    *,
    model: type[QuizQuestion] | type[Flashcard],
    key_field: str,
    prefix: str,
    knowledge_base_id: str,
    keys: Sequence[str],
    build: Callable[[int, str], dict[str, Any]],
) -> list[tuple[str, str | None]]:
    """Publish the entries whose key the knowledge base lacks, the first of each key
    only. Returns, per entry, ``(status, id of the published row)``.

    The first entry of every key is offered in one ``INSERT ... ON CONFLICT DO
    NOTHING RETURNING``: what it returns is what this result published; only when
    some keys were already taken is their holder read, in one more statement."""
    first_of_key: dict[str, int] = {}
    for position, key in enumerate(keys):
        first_of_key.setdefault(key, position)
    ids = ordered_ids(prefix, len(first_of_key))
    rows = [build(position, ids[n]) for n, position in enumerate(first_of_key.values())]
    # Inserted in key order, so two transactions publishing overlapping keys wait
    # for each other in the same order and never deadlock.
    rows.sort(key=lambda row: row[key_field])
    inserted = insert_rows(model, rows, suffix=f"ON CONFLICT DO NOTHING RETURNING {key_field}, id")
    holders = {str(key): str(row_id) for key, row_id in inserted}
    mine = set(holders)
    taken = sorted(key for key in first_of_key if key not in holders)
    if taken:  # who holds the others: an earlier job, or a writer that got there first
        holders.update((str(key), str(row_id)) for key, row_id in _holders(model, key_field, knowledge_base_id, taken))
    outcome: list[tuple[str, str | None]] = []
    for position, key in enumerate(keys):
        published = key in mine and first_of_key[key] == position
        outcome.append((CandidateStatus.PUBLISHED if published else CandidateStatus.DUPLICATE, holders.get(key)))
    return outcome


_HOLDERS = {QuizQuestion: queries.QUESTION_HOLDERS, Flashcard: queries.FLASHCARD_HOLDERS}


def _holders(
    model: type[QuizQuestion] | type[Flashcard], key_field: str, knowledge_base_id: str, keys: list[str]
) -> list[tuple[str, str]]:
    """The rows of the knowledge base holding ``keys``, as ``(key, id)``."""
    if connection.vendor == "postgresql":
        return [tuple(row) for row in fetch(_HOLDERS[model], {"knowledge_base_id": knowledge_base_id, "keys": keys})]
    rows = model.objects.filter(knowledge_base_id=knowledge_base_id, **{f"{key_field}__in": keys})  # no arrays
    return list(rows.values_list(key_field, "id"))


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
) -> Stored:
    """The entries as candidates, each with what became of it: published, a
    duplicate (with the row it duplicates), or nowhere to go (the knowledge base is
    gone). Returns the counts the notice gives."""
    entries = output[publication.entries]
    base = base_fields(job, result)
    knowledge_base = _knowledge_base_locked(job)
    knowledge_base_id = knowledge_base.pk if knowledge_base is not None else None
    own = own_points(job, (entry.get("knowledgePointId") for entry in entries))
    normalized = [normalize_text(entry[publication.text]) for entry in entries]
    keys = [text_key(text) for text in normalized]

    def published(position: int, row_id: str) -> dict[str, Any]:
        entry = entries[position]
        return {
            **base,
            "id": row_id,
            "knowledge_base_id": knowledge_base_id,
            "knowledge_point_id": point(entry, own),
            publication.normalized_field: normalized[position],
            publication.key_field: keys[position],
            **publication.fields(entry),
        }

    outcome: list[tuple[str, str | None]] = [(CandidateStatus.NO_KNOWLEDGE_BASE, None)] * len(entries)
    if knowledge_base_id is not None:
        outcome = _publish(
            model=publication.model,
            key_field=publication.key_field,
            prefix=publication.prefix,
            knowledge_base_id=knowledge_base_id,
            keys=keys,
            build=published,
        )
    ids = ordered_ids(publication.candidate_prefix, len(entries))
    insert_rows(
        publication.candidate,
        [
            {
                **base,
                "id": ids[position],
                "position": position,
                "knowledge_base_id": knowledge_base_id,
                "knowledge_point_id": point(entry, own),
                publication.normalized_field: normalized[position],
                **publication.fields(entry),
                "status": outcome[position][0],
                publication.link: outcome[position][1],
            }
            for position, entry in enumerate(entries)
        ],
    )
    statuses = [status for status, _ in outcome]
    return {
        "published": statuses.count(CandidateStatus.PUBLISHED),
        "duplicates": statuses.count(CandidateStatus.DUPLICATE),
    }


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


def store_quiz(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> Stored:
    return store_published(QUESTIONS, job, output, result)


def store_flashcards(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> Stored:
    return store_published(FLASHCARDS, job, output, result)
