"""``POST /ai/jobs`` in at most eight statements besides the snapshot's (issue 12), the
JWT user's lookup included: a test that fails when the count grows past it."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.api.tokens import RefreshToken
from ai_jobs.services import creation
from tests.support.learning_factories import KnowledgeBaseFactory
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

MAX_STATEMENTS = 8


def _not_counted(sql: str) -> bool:
    # The test runs inside a transaction: atomic() is a savepoint here, BEGIN/COMMIT in
    # production. Without Redis (the embedded default) the throttle counts in a table.
    return (
        sql.startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT")) or "quotas_throttle_window" in sql
    )


@pytest.fixture
def counted(monkeypatch):
    """POST /ai/jobs through the JWT authentication; the statements it ran, without the snapshot's."""
    snapshot_statements: list[str] = []
    real = creation.snapshot_create

    def snapshot_create(**kwargs: Any):
        with CaptureQueriesContext(connection) as inner:
            snapshot = real(**kwargs)
        snapshot_statements.extend(query["sql"] for query in inner.captured_queries)
        return snapshot

    monkeypatch.setattr(creation, "snapshot_create", snapshot_create)

    def post(learner: Learner, body: dict[str, Any]) -> tuple[int, list[str]]:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {RefreshToken.for_user(learner.user).access_token}")
        snapshot_statements.clear()
        with CaptureQueriesContext(connection) as ctx:
            response = client.post("/ai/jobs", body, format="json")
        own = [
            query["sql"]
            for query in ctx.captured_queries
            if query["sql"] not in snapshot_statements and not _not_counted(query["sql"])
        ]
        return response.status_code, own

    return post


def test_a_platform_key_job_with_an_idempotency_key(counted):
    learner = Learner()
    body = {"jobType": "learning_state_analysis", "targetType": "user", "targetId": "me", "idempotencyKey": "k-1"}
    learner.job()  # the day's usage row exists, as it does after the first job
    status, statements = counted(learner, body)
    assert status == 201
    assert len(statements) <= MAX_STATEMENTS, "\n".join(statements)
    assert any(sql.replace('"', "").startswith("INSERT INTO ai_runtime_job ") for sql in statements)
    status, statements = counted(learner, body)  # the repeat answers the same job
    assert status == 200
    assert len(statements) <= MAX_STATEMENTS, "\n".join(statements)


def test_a_users_key_job_on_a_knowledge_base(counted):
    learner = Learner()
    kb = KnowledgeBaseFactory(user=learner.user)
    body = {
        "jobType": "quiz_generation",
        "targetType": "knowledge_base",
        "targetId": kb.id,
        "apiKeyMode": "user_deepseek_key",
        "credentialId": learner.credential(),
        "idempotencyKey": "k-2",
        "params": {"questionCount": 5},
    }
    status, statements = counted(learner, body)
    assert status == 201
    assert len(statements) <= MAX_STATEMENTS, "\n".join(statements)
