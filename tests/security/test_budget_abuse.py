"""The budget against a learner who games it, tried from outside on a live gunicorn:
changing timezone hands no fresh day (neither jobs nor tokens), and the learning API
is throttled per user and capped per kind of object."""

from __future__ import annotations

import pytest
import requests

from quotas.models import UserAiSettings
from tests.support.factories import VALID_OUTPUTS
from tests.support.security.budget import RUNTIME, Learner, code, module_server

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Fourteen hours east and twelve west of UTC: their local dates differ at every instant.
EAST, WEST = "Pacific/Kiritimati", "Etc/GMT+12"

server = module_server()
throttled_server = module_server(USER_THROTTLE_RATE="5/min", LEARNING_MAX_OBJECTS_PER_USER="2")


def _learner(url: str, **limits: int) -> Learner:
    learner = Learner(url)
    assert learner.patch("/ai/settings", {"aiAnalysisEnabled": True, "timezone": WEST}).status_code == 200
    UserAiSettings.objects.filter(user=learner.user).update(**limits)  # the limits are staff's
    return learner


def test_a_learner_cannot_dodge_the_daily_job_limit_by_changing_timezone(server):
    learner = _learner(server, max_daily_ai_jobs=2)
    assert [learner.job().status_code for _ in range(2)] == [201, 201]
    refused = learner.job()
    assert refused.status_code == 400 and code(refused) == "DAILY_JOB_LIMIT_EXCEEDED"
    west_day = learner.get("/ai/settings").json()["localDate"]
    for zone in (EAST, WEST, EAST):
        moved = learner.patch("/ai/settings", {"timezone": zone})
        assert moved.status_code == 200 and (moved.json()["localDate"] == west_day) == (zone == WEST)
        refused = learner.job()
        assert refused.status_code == 400 and code(refused) == "DAILY_JOB_LIMIT_EXCEEDED", refused.text
    profile = learner.get("/ai/profile").json()
    assert profile["localDate"] != west_day and profile["usage"]["platform_key"]["jobsRemaining"] == 0


def test_a_result_landing_after_a_change_of_timezone_still_counts_against_the_day(server):
    learner = _learner(server, max_daily_ai_jobs=20, max_daily_token_budget=400)
    job_id = learner.job().json()["jobId"]
    assert learner.patch("/ai/settings", {"timezone": EAST}).status_code == 200
    runtime = requests.Session()
    runtime.headers.update(RUNTIME)
    assert runtime.post(f"{server}/internal/runtime/jobs/{job_id}/lock", json={}).status_code == 200
    result = runtime.post(
        f"{server}/internal/runtime/jobs/{job_id}/result",
        json={"attemptNo": 1, "output": VALID_OUTPUTS["learning_state_analysis"],
              "usage": {"promptTokens": 300, "completionTokens": 200}},
    )  # fmt: skip
    assert result.status_code == 200, result.text
    assert learner.get("/ai/profile").json()["usage"]["platform_key"]["tokensUsed"] == 500
    refused = learner.job()
    assert refused.status_code == 400 and code(refused) == "DAILY_TOKEN_BUDGET_EXCEEDED"


def test_the_learning_api_throttles_each_user(throttled_server):
    busy, quiet = Learner(throttled_server), Learner(throttled_server)
    # Eleven requests in at most two of the throttle's one-minute windows: one of them
    # holds more than five.
    answers = [busy.get("/learning/knowledge-bases") for _ in range(11)]
    limited = [answer for answer in answers if answer.status_code == 429]
    assert limited and {answer.status_code for answer in answers} == {200, 429}
    assert code(limited[0]) == "RATE_LIMITED" and int(limited[0].headers["Retry-After"]) >= 1
    assert quiet.get("/learning/knowledge-bases").status_code == 200


def test_a_learner_holds_no_more_learning_objects_of_a_kind_than_the_limit(throttled_server):
    learner = Learner(throttled_server)
    made = [learner.post("/learning/knowledge-bases", {"name": f"kb {n}"}) for n in range(2)]
    assert [response.status_code for response in made] == [201, 201]
    refused = learner.post("/learning/knowledge-bases", {"name": "one more"})
    assert refused.status_code == 409 and refused.json()["error"] == {
        "code": "LEARNING_LIMIT_EXCEEDED",
        "message": "A user holds at most 2 knowledge bases: delete some to add more",
        "retryable": False,
    }
    material = learner.post("/learning/materials", {"knowledgeBaseId": made[0].json()["id"], "title": "m"})
    assert material.status_code == 201  # each kind has its own limit
