"""What a job's result becomes: each job type's output, submitted
through the internal API, ends as its records and is read back through the user
API; quiz questions and flashcards are published once per knowledge base."""

from __future__ import annotations

import copy

import pytest
from django.db import IntegrityError, transaction

from accounts.selectors import public_id_of
from ai_jobs.models import (
    AiLearningAnalysis,
    Flashcard,
    FlashcardCandidate,
    NextActionRecommendation,
    QuizQuestion,
    QuizQuestionCandidate,
    WeakPointCandidate,
)
from ai_jobs.outputs import normalize_text
from tests.support.api import user_client
from tests.support.factories import VALID_OUTPUTS, JobFactory
from tests.support.learning_factories import KnowledgeBaseFactory, KnowledgePointFactory, MaterialFactory
from tests.support.outputs import cards, finish, kb_job, question, quiz

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

LIST_OF_TYPE = {
    "learning_state_analysis": "analyses",
    "weak_point_analysis": "weak-points",
    "next_action_planning": "recommendations",
    "quiz_generation": "quizzes",
    "flashcard_generation": "flashcards",
}


def fullwidth(text: str) -> str:
    """The full-width forms (U+FF01...) of the ASCII characters of ``text``."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


# --- each job type ---------------------------------------------------------------------------


@pytest.mark.parametrize("job_type", sorted(LIST_OF_TYPE))
def test_a_result_of_each_job_type_becomes_its_records_in_the_user_api(runtime, job_type):
    knowledge_base = KnowledgeBaseFactory()
    if job_type in ("quiz_generation", "flashcard_generation"):
        job = kb_job(knowledge_base, job_type)
    else:
        job = JobFactory(user=knowledge_base.user, job_type=job_type)
    finish(runtime, job, VALID_OUTPUTS[job_type])

    response = user_client(job.user).get(f"/ai/{LIST_OF_TYPE[job_type]}")
    assert response.status_code == 200
    body = response.json()
    assert body["next"] is None and len(body["results"]) == 1
    record = body["results"][0]
    assert record["jobId"] == job.id
    assert (record["targetType"], record["targetId"]) == (job.target_type, job.target_id)
    assert record["id"] and "createdAt" in record


def test_an_analysis_keeps_every_field_of_the_output(runtime, user):
    job = JobFactory(user=user)
    finish(runtime, job, VALID_OUTPUTS["learning_state_analysis"])
    record = user_client(user).get("/ai/analyses").json()["results"][0]
    assert {key: record[key] for key in VALID_OUTPUTS["learning_state_analysis"]} == {
        "summary": "Steady progress in algebra.",
        "masteryScore": 72.5,
        "level": "proficient",
        "strengths": ["linear equations"],
        "weaknesses": ["fractions"],
        "confidence": 0.8,
    }
    assert AiLearningAnalysis.objects.get().job_id == job.id


def test_weak_points_are_one_record_each_in_output_order_and_a_foreign_point_is_null(runtime):
    point = KnowledgePointFactory()
    foreign = KnowledgePointFactory()  # another user's
    job = JobFactory(user=point.user, job_type="weak_point_analysis")
    entry = VALID_OUTPUTS["weak_point_analysis"]["weakPoints"][0]
    output = {
        "weakPoints": [
            {**entry, "title": "Mine", "knowledgePointId": point.id},
            {**entry, "title": "Foreign", "knowledgePointId": foreign.id},
            {**entry, "title": "Made up", "knowledgePointId": "kp_does_not_exist"},
            {**entry, "title": "None", "knowledgePointId": None},
        ]
    }
    finish(runtime, job, output)
    results = user_client(point.user).get("/ai/weak-points").json()["results"]
    assert [(r["title"], r["knowledgePointId"]) for r in results] == [
        ("Mine", point.id),
        ("Foreign", None),
        ("Made up", None),
        ("None", None),
    ]
    assert results[0]["severity"] == "high" and results[0]["evidence"] == ["attempt 1"]
    assert WeakPointCandidate.objects.count() == 4


def test_recommendations_keep_only_targets_that_are_the_users_own(runtime):
    material = MaterialFactory()
    user = material.user
    foreign = MaterialFactory()
    job = JobFactory(user=user, job_type="next_action_planning")
    entry = VALID_OUTPUTS["next_action_planning"]["recommendations"][0]
    output = {
        "recommendations": [
            {**entry, "title": "Read", "targetType": "material", "targetId": material.id},
            {**entry, "title": "Steal", "targetType": "material", "targetId": foreign.id},
            {**entry, "title": "Me", "targetType": "user", "targetId": public_id_of(user)},
            {**entry, "title": "Me too", "targetType": "user", "targetId": "me"},
            {**entry, "title": "Not by key", "targetType": "user", "targetId": str(user.pk)},
            {**entry, "title": "Someone", "targetType": "user", "targetId": public_id_of(foreign.user)},
            {**entry, "title": "Odd", "targetType": "planet", "targetId": "mars"},
            {**entry, "title": "Plain", "actionType": "rest", "priority": 5, "estimatedMinutes": 30},
        ]
    }
    finish(runtime, job, output)
    results = user_client(user).get("/ai/recommendations").json()["results"]
    assert [(r["title"], r["actionTargetType"], r["actionTargetId"]) for r in results] == [
        ("Read", "material", material.id),
        ("Steal", None, None),
        ("Me", "user", public_id_of(user)),
        ("Me too", "user", public_id_of(user)),
        ("Not by key", None, None),
        ("Someone", None, None),
        ("Odd", None, None),
        ("Plain", None, None),
    ]
    plain = results[-1]
    assert (plain["actionType"], plain["priority"], plain["estimatedMinutes"]) == ("rest", 5, 30)
    assert all((r["targetType"], r["targetId"]) == ("user", public_id_of(user)) for r in results)
    assert NextActionRecommendation.objects.count() == 8


# --- quiz questions and flashcards ----------------------------------------------------------------


def test_quiz_candidates_are_published_as_questions_of_the_knowledge_base(runtime):
    point = KnowledgePointFactory()
    knowledge_base = point.knowledge_base
    job = kb_job(knowledge_base)
    output = {
        "questions": [
            question("What is 1/2 + 1/4?", knowledgePointId=point.id),
            question("Pick the primes", questionType="multiple_choice", options=["2", "3", "4"], answer=["2", "3"]),
            question("Is 0 even?", questionType="true_false", options=["true", "false"], answer="true"),
            question("Define a fraction", questionType="short_answer", options=[], answer="A part of a whole"),
        ]
    }
    finish(runtime, job, output)
    results = user_client(knowledge_base.user).get("/ai/quizzes").json()["results"]
    assert [r["stem"] for r in results] == [q["stem"] for q in output["questions"]]
    first = results[0]
    assert first["knowledgeBaseId"] == knowledge_base.id and first["knowledgePointId"] == point.id
    assert results[1]["answer"] == ["2", "3"] and results[3]["options"] == []
    assert set(QuizQuestionCandidate.objects.values_list("status", flat=True)) == {"published"}
    published = {c.question_id for c in QuizQuestionCandidate.objects.all()}
    assert published == {r["id"] for r in results}


def test_a_second_identical_quiz_publishes_no_duplicate_questions(runtime):
    knowledge_base = KnowledgeBaseFactory()
    output = quiz("What is 1/2 + 1/4?", "Is 0 even?")
    first, second = kb_job(knowledge_base), kb_job(knowledge_base)
    finish(runtime, first, output)
    finish(runtime, second, copy.deepcopy(output))

    assert QuizQuestion.objects.filter(knowledge_base=knowledge_base).count() == 2
    client = user_client(knowledge_base.user)
    assert len(client.get("/ai/quizzes").json()["results"]) == 2
    assert client.get("/ai/quizzes", {"jobId": second.id}).json()["results"] == []
    candidates = QuizQuestionCandidate.objects.filter(job_id=second.id).order_by("position")
    assert [c.status for c in candidates] == ["duplicate", "duplicate"]
    originals = dict(QuizQuestion.objects.values_list("stem", "id"))
    assert [c.question_id for c in candidates] == [originals["What is 1/2 + 1/4?"], originals["Is 0 even?"]]


def test_the_same_quiz_in_another_knowledge_base_is_published_there_too(runtime):
    knowledge_base = KnowledgeBaseFactory()
    other_base = KnowledgeBaseFactory(user=knowledge_base.user)
    finish(runtime, kb_job(knowledge_base), quiz("Is 0 even?"))
    finish(runtime, kb_job(other_base), quiz("Is 0 even?"))
    assert QuizQuestion.objects.filter(knowledge_base=knowledge_base).count() == 1
    assert QuizQuestion.objects.filter(knowledge_base=other_base).count() == 1


def test_duplicates_inside_one_output_are_skipped_after_normalisation(runtime):
    knowledge_base = KnowledgeBaseFactory()
    stems = [
        "What is 1/2 + 1/4?",
        "  what IS 1/2 +\t1/4 \uff1f ",  # case, whitespace, a full-width trailing question mark
        fullwidth("What is 1/2 + 1/4"),  # full-width letters, digits and signs
        "What is 1/2 + 1/4 = ?",  # a different question: "=" is not punctuation
    ]
    job = kb_job(knowledge_base)
    finish(runtime, job, quiz(*stems))
    candidates = list(QuizQuestionCandidate.objects.filter(job_id=job.id).order_by("position"))
    assert [c.status for c in candidates] == ["published", "duplicate", "duplicate", "published"]
    assert candidates[1].question_id == candidates[2].question_id == candidates[0].question_id
    questions = QuizQuestion.objects.filter(knowledge_base=knowledge_base)
    assert sorted(q.stem for q in questions) == sorted([stems[0], stems[3]])
    assert questions.get(stem=stems[0]).normalized_stem == "what is 1/2 + 1/4"


def test_normalisation_rule():
    assert normalize_text("  Straße\u3000ist\n\nLANG!!! ") == "strasse ist lang"
    assert normalize_text("\ufb01nal\uff1f\u3002\u2026") == "final"  # a ligature; full-width ?, ideographic stop
    assert normalize_text("¿Qué es?") == "¿qué es"  # leading punctuation stays
    assert normalize_text("50 %.") == "50 %"  # only sentence punctuation goes
    assert normalize_text("f(x) = ?") == "f(x) ="
    assert normalize_text("???") == ""


def test_flashcards_are_published_skipping_fronts_the_knowledge_base_has(runtime):
    knowledge_base = KnowledgeBaseFactory()
    user = knowledge_base.user
    first = kb_job(knowledge_base, "flashcard_generation")
    finish(
        runtime,
        first,
        {
            "flashcards": [
                {"front": "Numerator", "back": "The top", "hint": "up", "tags": ["fractions"]},
                {"front": "numerator.", "back": "Again, within one output"},
            ]
        },
    )
    second = kb_job(knowledge_base, "flashcard_generation")
    finish(runtime, second, cards("NUMERATOR", "Denominator"))

    results = user_client(user).get("/ai/flashcards").json()["results"]
    assert [r["front"] for r in results] == ["Denominator", "Numerator"]
    numerator = results[1]
    assert (numerator["back"], numerator["hint"], numerator["tags"], numerator["jobId"]) == (
        "The top",
        "up",
        ["fractions"],
        first.id,
    )
    statuses = FlashcardCandidate.objects.order_by("job_id", "position").values_list("job_id", "status")
    assert list(statuses) == [
        (first.id, "published"),
        (first.id, "duplicate"),
        (second.id, "duplicate"),
        (second.id, "published"),
    ]
    assert Flashcard.objects.filter(knowledge_base=knowledge_base).count() == 2


def test_a_quiz_whose_knowledge_base_is_gone_keeps_its_candidates_and_publishes_nothing(runtime):
    knowledge_base = KnowledgeBaseFactory()
    job = kb_job(knowledge_base)
    knowledge_base.delete()
    finish(runtime, job, quiz("Is 0 even?"))
    assert QuizQuestion.objects.count() == 0
    assert list(QuizQuestionCandidate.objects.values_list("status", flat=True)) == ["no_knowledge_base"]


def test_the_knowledge_base_prefetch_is_batched_for_a_50_question_result(
    runtime, django_assert_max_num_queries, settings
):
    knowledge_base = KnowledgeBaseFactory()
    point = KnowledgePointFactory(knowledge_base=knowledge_base)
    finish(runtime, kb_job(knowledge_base), quiz(*(f"Old question {n}" for n in range(25))))
    stems = [f"Old question {n}" for n in range(25)] + [f"New question {n}" for n in range(25)]
    job = kb_job(knowledge_base)
    lock = runtime.lock(job.id).json()
    output = quiz(*stems, knowledgePointId=point.id)
    # The whole result call, HTTP included: a query per candidate would be 50 more.
    with django_assert_max_num_queries(20) as captured:
        response = runtime.result(job.id, lock["attemptNo"], output)
    assert response.status_code == 200
    sqls = [" ".join(q["sql"].replace('"', "").split()) for q in captured.captured_queries]
    prefetches = [sql for sql in sqls if sql.startswith("SELECT") and "FROM ai_quiz_question " in sql]
    # The whole output is offered in one INSERT ... ON CONFLICT DO NOTHING RETURNING; the one
    # read is of who holds the 25 keys already taken.
    assert len(prefetches) == 1, prefetches
    candidates = QuizQuestionCandidate.objects.filter(job_id=job.id)
    assert candidates.filter(status="duplicate").count() == 25 and candidates.filter(status="published").count() == 25
    assert QuizQuestion.objects.filter(knowledge_base=knowledge_base).count() == 50


def test_the_unique_constraint_refuses_a_duplicate_question_written_past_the_service(runtime):
    knowledge_base = KnowledgeBaseFactory()
    finish(runtime, kb_job(knowledge_base), quiz("Is 0 even?"))
    existing = QuizQuestion.objects.get()
    existing.pk = None
    existing.id = "qq_copy"
    with pytest.raises(IntegrityError), transaction.atomic():
        existing.save(force_insert=True)
