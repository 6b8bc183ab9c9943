"""Results publishing into one knowledge base at the same moment, from real threads
on PostgreSQL with committed transactions: no question is ever published twice."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from ai_jobs.models import Notification, QuizQuestion, QuizQuestionCandidate
from ai_jobs.outputs import publishing
from learning.models import KnowledgeBase
from tests.support.api import RuntimeClient
from tests.support.learning_factories import KnowledgeBaseFactory
from tests.support.outputs import kb_job, quiz

pytestmark = pytest.mark.django_db(transaction=True)

RESULTS = 6


@pytest.fixture(autouse=True)
def _postgres_and_eager(settings) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (make test uses it)")
    settings.CELERY_TASK_ALWAYS_EAGER = True


@pytest.mark.parametrize("lock", [True, False], ids=["knowledge-base-locked", "unique-constraint-only"])
def test_concurrent_identical_quiz_results_publish_each_question_once(lock, monkeypatch):
    if not lock:  # the constraint and ON CONFLICT DO NOTHING alone must also hold
        monkeypatch.setattr(
            publishing,
            "_knowledge_base_locked",
            lambda job: KnowledgeBase.objects.filter(id=job.target_id, user_id=job.user_id).first(),
        )
    knowledge_base = KnowledgeBaseFactory()
    stems = [f"Question {n}?" for n in range(20)]
    jobs = [kb_job(knowledge_base) for _ in range(RESULTS)]
    runtimes = [RuntimeClient(f"runtime-{n}") for n in range(RESULTS)]
    attempts = [runtime.lock(job.id).json()["attemptNo"] for runtime, job in zip(runtimes, jobs, strict=True)]
    barrier = threading.Barrier(RESULTS)
    statuses: list[int] = []

    def submit(n: int) -> None:
        try:
            # Each result lists the stems in its own order, so the writers collide on every key.
            output = quiz(*(stems[n:] + stems[:n]))
            barrier.wait()
            statuses.append(runtimes[n].result(jobs[n].id, attempts[n], output).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(RESULTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert statuses == [200] * RESULTS
    assert QuizQuestion.objects.filter(knowledge_base=knowledge_base).count() == len(stems)
    candidates = QuizQuestionCandidate.objects.all()
    assert candidates.count() == RESULTS * len(stems)
    assert candidates.filter(status="published").count() == len(stems)
    assert candidates.filter(status="duplicate").count() == (RESULTS - 1) * len(stems)
    assert not candidates.filter(question__isnull=True).exists()
    assert Notification.objects.count() == RESULTS
