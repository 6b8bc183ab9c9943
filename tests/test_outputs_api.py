"""The result lists of the user API: JWT, the signed-in user's own
records only, newest first, filters, cursor pagination, 400 for bad input."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from accounts.selectors import public_id_of
from tests.support.api import RuntimeClient, user_client
from tests.support.factories import VALID_OUTPUTS, JobFactory, UserFactory
from tests.support.learning_factories import KnowledgeBaseFactory
from tests.support.outputs import finish, kb_job, quiz

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

LISTS = ["analyses", "weak-points", "recommendations", "quizzes", "flashcards", "notifications"]


def analysed(runtime: RuntimeClient, user, **job_fields):
    job = JobFactory(user=user, **job_fields)
    finish(runtime, job, VALID_OUTPUTS["learning_state_analysis"])
    return job


@pytest.mark.parametrize("name", LISTS)
def test_every_list_needs_a_signed_in_user(name):
    response = APIClient().get(f"/ai/{name}")
    assert response.status_code == 401 and response.json()["error"]["code"] == "UNAUTHORIZED"


def test_a_jwt_from_auth_token_reads_the_lists(runtime, user):
    analysed(runtime, user)
    client = APIClient()
    token = client.post("/auth/token", {"username": user.username, "password": "pw-123456"}, format="json")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.json()['access']}")
    assert len(client.get("/ai/analyses").json()["results"]) == 1


def test_another_users_records_are_never_listed(runtime):
    mine, theirs = UserFactory(), UserFactory()
    my_job = analysed(runtime, mine)
    their_job = analysed(runtime, theirs)
    knowledge_base = KnowledgeBaseFactory(user=theirs)
    finish(runtime, kb_job(knowledge_base), quiz("Is 0 even?"))
    client = user_client(mine)
    assert [r["jobId"] for r in client.get("/ai/analyses").json()["results"]] == [my_job.id]
    assert client.get("/ai/analyses", {"jobId": their_job.id}).json()["results"] == []
    assert client.get("/ai/quizzes", {"targetId": knowledge_base.id}).json()["results"] == []


def test_lists_are_newest_first_and_filter_by_target_and_job(runtime, user):
    on_user = analysed(runtime, user)
    on_base = analysed(runtime, user, target_type="knowledge_base", target_id="kb_a")
    on_other_base = analysed(runtime, user, target_type="knowledge_base", target_id="kb_b")
    client = user_client(user)

    def job_ids(**query) -> list[str]:
        response = client.get("/ai/analyses", query)
        assert response.status_code == 200
        return [r["jobId"] for r in response.json()["results"]]

    assert job_ids() == [on_other_base.id, on_base.id, on_user.id]
    assert job_ids(targetType="knowledge_base") == [on_other_base.id, on_base.id]
    assert job_ids(targetType="knowledge_base", targetId="kb_a") == [on_base.id]
    assert job_ids(targetId=public_id_of(user)) == [on_user.id]
    assert job_ids(targetType="user", targetId="me") == [on_user.id]
    assert job_ids(jobId=on_user.id) == [on_user.id]
    assert job_ids(jobId="job_missing") == []


def test_pagination_follows_the_cursor_with_limit(runtime, user):
    jobs = [analysed(runtime, user) for _ in range(5)]
    client = user_client(user)
    seen: list[str] = []
    query: dict[str, str] = {"limit": "2"}
    pages = 0
    while True:
        body = client.get("/ai/analyses", query).json()
        assert set(body) == {"results", "next"} and len(body["results"]) <= 2
        seen += [r["jobId"] for r in body["results"]]
        pages += 1
        if body["next"] is None:
            break
        query = {"limit": "2", "cursor": body["next"]}
    assert pages == 3 and seen == [job.id for job in reversed(jobs)]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"targetType": "planet"}, "targetType"),
        ({"targetId": "x" * 65}, "targetId"),
        ({"jobId": "j" * 65}, "jobId"),
    ],
)
@pytest.mark.parametrize("name", ["analyses", "quizzes", "notifications"])
def test_bad_filters_and_pagination_are_validation_errors(user, name, query, field):
    response = user_client(user).get(f"/ai/{name}", query)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and field in error["fields"]


def test_the_lists_are_throttled_per_user(user, settings, monkeypatch):
    settings.USER_THROTTLE_RATE = "2/min"
    monkeypatch.setattr("quotas.throttles.clock", lambda: 1_800_000_030.0)  # mid-window: no boundary to cross
    client = user_client(user)
    assert [client.get("/ai/analyses").status_code for _ in range(2)] == [200, 200]
    response = client.get("/ai/quizzes")
    assert response.status_code == 429 and response.json()["error"]["code"] == "RATE_LIMITED"
    assert "Retry-After" in response.headers
    assert user_client(UserFactory()).get("/ai/analyses").status_code == 200


def test_the_schema_documents_the_result_and_notification_endpoints(client):
    paths = client.get("/api/schema", HTTP_ACCEPT="application/json").json()["paths"]
    for name in LISTS:
        assert f"/ai/{name}" in paths
    assert "/ai/notifications/{notification_id}/read" in paths
