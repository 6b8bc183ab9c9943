"""Operators see what results became, read-only, in Django admin."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from ai_jobs.models import Notification, QuizQuestion, QuizQuestionCandidate
from ai_jobs.notifications import notification_create_for_job
from tests.support.api import RuntimeClient
from tests.support.learning_factories import KnowledgeBaseFactory
from tests.support.outputs import finish, kb_job, quiz

pytestmark = pytest.mark.django_db

PAGES = [
    "ailearninganalysis",
    "weakpointcandidate",
    "nextactionrecommendation",
    "quizquestioncandidate",
    "quizquestion",
    "flashcardcandidate",
    "flashcard",
    "notification",
]


@pytest.fixture
def operator() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("operator", "op@example.com", "pw"))
    return client


def test_the_record_pages_render_with_their_filters_and_refuse_changes(operator):
    knowledge_base = KnowledgeBaseFactory()
    job = kb_job(knowledge_base)
    finish(RuntimeClient(), job, quiz("Is 0 even?", "is 0 even"))
    notification_create_for_job(job_id=job.id)
    for page in PAGES:
        assert operator.get(f"/admin/ai_jobs/{page}/").status_code == 200, page
    filtered = operator.get("/admin/ai_jobs/quizquestioncandidate/?status__exact=duplicate").content.decode()
    duplicate = QuizQuestionCandidate.objects.get(status="duplicate")
    assert duplicate.id in filtered
    assert operator.get(f"/admin/ai_jobs/notification/?read_at__isempty=1&q={job.id}").status_code == 200
    question = QuizQuestion.objects.get()
    assert operator.get(f"/admin/ai_jobs/quizquestion/{question.id}/change/").status_code == 200  # view only
    operator.post(f"/admin/ai_jobs/quizquestion/{question.id}/change/", {"stem": "changed"})
    question.refresh_from_db()
    assert question.stem == "Is 0 even?"
    assert operator.get("/admin/ai_jobs/notification/add/").status_code == 403
    assert operator.get(f"/admin/ai_jobs/notification/{Notification.objects.get().id}/delete/").status_code == 403
