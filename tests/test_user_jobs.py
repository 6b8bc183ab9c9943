"""POST /ai/jobs and the user's jobs, settings and profile: the
eleven steps of a job's creation in order, every user error code in its situation."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from accounts.selectors import public_id_of
from ai_jobs.models import AiRuntimeJob
from ai_jobs.services import creation
from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import CircuitState, PlatformDailyUsage, UserAiSettings, UserAiUsage
from tests.support.api import RuntimeClient, error_code
from tests.support.factories import VALID_OUTPUTS
from tests.support.learning_factories import KnowledgeBaseFactory
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


@pytest.fixture
def learner() -> Learner:
    return Learner()


def test_a_job_is_created_pending_with_its_snapshot_and_counted(learner):
    response = learner.job(priority=3, params={"focus": "fractions"})
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "pending" and body["jobType"] == "learning_state_analysis"
    assert body["priority"] == 3 and body["params"] == {"focus": "fractions"} and body["apiKeyMode"] == "platform_key"
    for field in (
        "jobId",
        "errorCode",
        "errorMessage",
        "cancelRequested",
        "startedAt",
        "finishedAt",
        "retriedFromJobId",
        "rerunAs",
    ):
        assert field in body
    job = AiRuntimeJob.objects.get(id=body["jobId"])
    assert job.snapshot is not None and job.snapshot.payload["learner"] == {"userId": public_id_of(learner.user)}
    usage = UserAiUsage.objects.get(user=learner.user, api_key_mode="platform_key")
    assert usage.job_count == 1


def test_login_with_a_jwt_then_create(client):
    learner = Learner()
    learner.user.set_password("s3cret-pass")
    learner.user.save()
    credentials = {"username": learner.user.username, "password": "s3cret-pass"}
    tokens = client.post("/auth/token", credentials, content_type="application/json").json()
    refreshed = client.post(
        "/auth/token/refresh", {"refresh": tokens["refresh"]}, content_type="application/json"
    ).json()
    wrong = client.post("/auth/token", {**credentials, "password": "nope"}, content_type="application/json")
    assert wrong.status_code == 401 and error_code(wrong) == "UNAUTHORIZED"
    assert "access" in refreshed
    response = client.post(
        "/ai/jobs",
        {"jobType": "next_action_planning", "targetType": "user", "targetId": "me"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {tokens['access']}",
    )
    assert response.status_code == 201


def test_without_a_token_the_user_api_answers_401(client):
    for path in ("/ai/jobs", "/ai/profile", "/ai/settings", "/ai/learning-profile"):
        response = client.get(path)
        assert response.status_code == 401 and error_code(response) == "UNAUTHORIZED", path
    bad = client.get("/ai/jobs", HTTP_AUTHORIZATION="Bearer not.a.jwt")
    assert bad.status_code == 401 and error_code(bad) == "UNAUTHORIZED"


def test_an_unknown_job_type_is_invalid_job_type(learner):
    response = learner.job("horoscope")
    assert response.status_code == 400 and error_code(response) == "INVALID_JOB_TYPE"


def test_quiz_and_flashcard_jobs_need_a_knowledge_base_target(learner):
    for job_type in ("quiz_generation", "flashcard_generation"):
        response = learner.job(job_type)
        assert response.status_code == 400 and error_code(response) == "INVALID_TARGET_TYPE"
    assert error_code(learner.job(targetType="planet")) == "INVALID_TARGET_TYPE"


def test_a_target_that_is_not_the_users_answers_404(learner):
    other_kb = KnowledgeBaseFactory()
    response = learner.quiz(kb=other_kb)
    assert response.status_code == 404 and error_code(response) == "NOT_FOUND"
    assert learner.job(targetId="999999").status_code == 404
    assert not AiRuntimeJob.objects.exists()


def test_ai_analysis_disabled_refuses_new_jobs(learner):
    learner.patch("/ai/settings", {"aiAnalysisEnabled": False})
    response = learner.job()
    assert response.status_code == 400 and error_code(response) == "AI_ANALYSIS_DISABLED"


def test_the_same_idempotency_key_answers_the_existing_job_with_200(learner):
    first = learner.job(idempotencyKey="client-uuid-1")
    again = learner.job(idempotencyKey="client-uuid-1")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["jobId"] == first.json()["jobId"]
    assert learner.job(idempotencyKey="client-uuid-2").json()["jobId"] != first.json()["jobId"]
    assert UserAiUsage.objects.get(user=learner.user).job_count == 2


def test_an_identical_request_whose_twin_commits_between_its_idempotency_and_quota_checks_answers_the_twin(
    learner, monkeypatch
):
    UserAiSettings.objects.filter(user=learner.user).update(max_daily_ai_jobs=1)
    twin = learner.job(idempotencyKey="last-one").json()["jobId"]  # the twin's job takes the day's last slot
    real = creation._existing
    looks = []

    def not_committed_yet_at_step_5(**lookup):
        looks.append(lookup["key"])
        return None if len(looks) == 1 else real(**lookup)

    monkeypatch.setattr(creation, "_existing", not_committed_yet_at_step_5)
    again = learner.job(idempotencyKey="last-one")
    assert again.status_code == 200 and again.json()["jobId"] == twin
    assert UserAiUsage.objects.get(user=learner.user).job_count == 1 and len(looks) == 2


def test_a_user_key_job_needs_a_credential_of_the_users_own(learner):
    response = learner.job(apiKeyMode="user_deepseek_key")
    assert response.status_code == 400 and error_code(response) == "CREDENTIAL_REQUIRED"
    foreign = Learner().credential()
    response = learner.job(apiKeyMode="user_deepseek_key", credentialId=foreign)
    assert response.status_code == 404 and error_code(response) == "CREDENTIAL_NOT_FOUND"
    mine = learner.credential()
    response = learner.job(apiKeyMode="user_deepseek_key", credentialId=mine)
    assert response.status_code == 201 and response.json()["credentialId"] == mine


def test_the_daily_job_limit_counts_each_key_mode_apart(learner):
    UserAiSettings.objects.update_or_create(user=learner.user, defaults={"max_daily_ai_jobs": 2})
    assert [learner.job().status_code for _ in range(2)] == [201, 201]
    response = learner.job()
    assert response.status_code == 400 and error_code(response) == "DAILY_JOB_LIMIT_EXCEEDED"
    credential = learner.credential()
    assert learner.job(apiKeyMode="user_deepseek_key", credentialId=credential).status_code == 201


def test_the_daily_token_budget_refuses_new_jobs_once_used(learner):
    UserAiSettings.objects.update_or_create(user=learner.user, defaults={"max_daily_token_budget": 100})
    day = quota_selectors.local_date(ai_settings=UserAiSettings.objects.get(user=learner.user))
    UserAiUsage.objects.create(user=learner.user, local_date=day, api_key_mode="platform_key", tokens_used=100)
    response = learner.job()
    assert response.status_code == 400 and error_code(response) == "DAILY_TOKEN_BUDGET_EXCEEDED"


def test_the_platform_budgets_refuse_platform_key_jobs_only(learner, settings):
    settings.PLATFORM_DAILY_TOKEN_BUDGET = 1000
    PlatformDailyUsage.objects.create(day=quota_selectors.platform_day(), shard=3, tokens_used=1000)
    response = learner.job()
    assert response.status_code == 400 and error_code(response) == "PLATFORM_TOKEN_BUDGET_EXCEEDED"
    settings.PLATFORM_DAILY_TOKEN_BUDGET = 10_000_000
    settings.PLATFORM_DAILY_COST_BUDGET_CENTS = 5
    PlatformDailyUsage.objects.create(day=quota_selectors.platform_day(), shard=4, cost_cents=5)
    response = learner.job()
    assert response.status_code == 400 and error_code(response) == "PLATFORM_COST_BUDGET_EXCEEDED"
    credential = learner.credential()
    assert learner.job(apiKeyMode="user_deepseek_key", credentialId=credential).status_code == 201


def test_question_and_card_counts_land_in_params_with_their_defaults_and_limits(learner):
    kb = KnowledgeBaseFactory(user=learner.user)
    assert learner.quiz(kb=kb).json()["params"] == {"questionCount": 10}
    assert learner.quiz(kb=kb, questionCount=5).json()["params"] == {"questionCount": 5}
    assert learner.quiz(kb=kb, params={"questionCount": 7}).json()["params"] == {"questionCount": 7}
    too_many = learner.quiz(kb=kb, questionCount=51)
    assert too_many.status_code == 400 and "questionCount" in too_many.json()["error"]["fields"]
    assert learner.quiz(kb=kb, params={"questionCount": "ten"}).status_code == 400
    cards = learner.job("flashcard_generation", targetType="knowledge_base", targetId=kb.id)
    assert cards.json()["params"] == {"cardCount": 20}
    assert (
        learner.job("flashcard_generation", targetType="knowledge_base", targetId=kb.id, cardCount=101).status_code
        == 400
    )


def test_bad_bodies_are_validation_errors_never_500(learner):
    for body in ({}, {"jobType": "learning_state_analysis"}, {"jobType": 5, "targetType": [], "targetId": {}},
                 {"jobType": "learning_state_analysis", "targetType": "user", "targetId": "1", "priority": -1},
                 {"jobType": "learning_state_analysis", "targetType": "user", "targetId": "1", "params": [1]},
                 {"jobType": "learning_state_analysis", "targetType": "user", "targetId": "1", "apiKeyMode": "x"}):  # fmt: skip
        response = learner.client.post("/ai/jobs", body, format="json")
        assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR", body
    malformed = learner.client.post("/ai/jobs", "{", content_type="application/json")
    assert malformed.status_code == 400


# --- the user's jobs -------------------------------------------------------------------------------


def test_the_user_lists_reads_and_cancels_their_own_jobs_only(learner):
    mine = [learner.job().json()["jobId"] for _ in range(3)]
    other = Learner()
    theirs = other.job().json()["jobId"]
    listed = learner.get("/ai/jobs", limit=2).json()
    assert [j["jobId"] for j in listed["results"]] == mine[::-1][:2]
    rest = learner.get("/ai/jobs", limit=2, cursor=listed["next"]).json()
    assert [j["jobId"] for j in rest["results"]] == [mine[0]] and rest["next"] is None
    assert learner.get(f"/ai/jobs/{mine[0]}").json()["jobId"] == mine[0]
    for response in (learner.get(f"/ai/jobs/{theirs}"), learner.client.post(f"/ai/jobs/{theirs}/cancel")):
        assert response.status_code == 404 and error_code(response) == "JOB_NOT_FOUND"
    assert AiRuntimeJob.objects.get(id=theirs).status == "pending"
    cancelled = learner.client.post(f"/ai/jobs/{mine[0]}/cancel").json()
    assert cancelled["status"] == "cancelled"
    assert learner.get("/ai/jobs", status="cancelled").json()["results"][0]["jobId"] == mine[0]
    assert learner.get("/ai/jobs", status="nonsense").status_code == 400


def test_cancelling_a_running_job_reaches_the_runtime_and_a_finished_job_cannot_be_cancelled(learner):
    job_id = learner.job().json()["jobId"]
    runtime = RuntimeClient("runtime-1")
    runtime.lock(job_id)
    body = learner.client.post(f"/ai/jobs/{job_id}/cancel").json()
    assert body["status"] == "locked" and body["cancelRequested"] is True
    assert runtime.heartbeat(job_id).json()["cancelRequested"] is True
    runtime.fail(job_id, 1, "JOB_CANCELLED")
    assert learner.client.post(f"/ai/jobs/{job_id}/cancel").json()["status"] == "cancelled"  # idempotent
    done = learner.job().json()["jobId"]
    runtime.lock(done)
    runtime.result(done, 1, VALID_OUTPUTS["learning_state_analysis"])
    again = learner.client.post(f"/ai/jobs/{done}/cancel")
    assert again.status_code == 409 and error_code(again) == "JOB_NOT_ACTIVE"


# --- settings and profile ------------------------------------------------------------------------


def test_settings_read_and_change_and_the_limits_are_for_staff(learner):
    body = learner.get("/ai/settings").json()
    assert body["aiAnalysisEnabled"] is True and body["maxDailyAiJobs"] == 20
    assert body["maxDailyTokenBudget"] == 100_000 and body["timezone"] == "UTC"
    changed = learner.patch("/ai/settings", {"timezone": "Asia/Shanghai", "defaultApiKeyMode": "user_deepseek_key"})
    assert changed.status_code == 200 and changed.json()["timezone"] == "Asia/Shanghai"
    bad = learner.patch("/ai/settings", {"timezone": "Mars/Olympus"})
    assert bad.status_code == 400 and "timezone" in bad.json()["error"]["fields"]
    forbidden = learner.patch("/ai/settings", {"maxDailyAiJobs": 500})
    assert forbidden.status_code == 403 and error_code(forbidden) == "FORBIDDEN"
    assert learner.get("/ai/settings").json()["maxDailyAiJobs"] == 20
    staff = Learner(is_staff=True)  # the staff flag alone is a learner's power
    assert staff.patch("/ai/settings", {"maxDailyAiJobs": 500}).status_code == 403
    boss = Learner(is_staff=True)
    boss.user.user_permissions.add(Permission.objects.get(codename="change_useraisettings"))
    assert boss.patch("/ai/settings", {"maxDailyAiJobs": 500}).json()["maxDailyAiJobs"] == 500


def test_turning_ai_off_cancels_pending_jobs_and_flags_running_ones(learner):
    pending = learner.job().json()["jobId"]
    running = learner.job().json()["jobId"]
    finished = learner.job().json()["jobId"]
    runtime = RuntimeClient("runtime-1")
    runtime.lock(running)
    runtime.heartbeat(running)
    runtime.lock(finished)
    runtime.result(finished, 1, VALID_OUTPUTS["learning_state_analysis"])
    learner.patch("/ai/settings", {"aiAnalysisEnabled": False})
    statuses = dict(AiRuntimeJob.objects.values_list("id", "status"))
    assert (statuses[pending], statuses[running], statuses[finished]) == ("cancelled", "running", "succeeded")
    assert runtime.heartbeat(running).json()["cancelRequested"] is True


def test_the_profile_shows_usage_per_key_mode_and_the_circuit(learner):
    learner.job()
    profile = learner.get("/ai/profile").json()
    assert profile["usage"]["platform_key"]["jobCount"] == 1
    assert profile["usage"]["platform_key"]["jobsRemaining"] == 19
    assert profile["usage"]["user_deepseek_key"]["jobCount"] == 0
    assert profile["circuit"]["state"] == "closed" and profile["circuit"]["platformKeyAvailable"] is True
    quotas.breaker_transition(to=CircuitState.OPEN, actor="test", reason="test")
    assert learner.get("/ai/profile").json()["circuit"]["platformKeyAvailable"] is False


def test_the_learning_profile_is_read_and_replaced(learner):
    assert learner.get("/ai/learning-profile").json()["goals"] == ""
    body = {
        "goals": "Pass the exam",
        "level": "intermediate",
        "preferredStudyTime": "evening",
        "preferences": {"lang": "zh"},
    }
    assert learner.client.put("/ai/learning-profile", body, format="json").status_code == 200
    assert learner.get("/ai/learning-profile").json()["preferences"] == {"lang": "zh"}
    assert Learner().get("/ai/learning-profile").json()["goals"] == ""


# --- a user's own day ---------------------------------------------------------------------------------


def test_each_user_is_counted_on_their_own_local_date(monkeypatch):
    shanghai, los_angeles = Learner(), Learner()
    for learner, zone in ((shanghai, "Asia/Shanghai"), (los_angeles, "America/Los_Angeles")):
        learner.patch("/ai/settings", {"timezone": zone})
    # 20:00 UTC on 30 November is already 1 December in Shanghai, still 30 November in Los Angeles.
    instant = dt.datetime(2099, 11, 30, 20, 0, tzinfo=dt.UTC)  # in the future: see below
    monkeypatch.setattr(timezone, "now", lambda: instant)
    shanghai.job()
    los_angeles.job()
    # (Leaving UTC today for another date left an empty row on today: the days they counted on have jobs.)
    assert UserAiUsage.objects.get(user=shanghai.user, job_count=1).local_date == dt.date(2099, 12, 1)
    assert UserAiUsage.objects.get(user=los_angeles.user, job_count=1).local_date == dt.date(2099, 11, 30)
    # Their limits reset at their own midnights: Los Angeles' 1 December starts at 08:00 UTC.
    UserAiSettings.objects.filter(user=los_angeles.user).update(max_daily_ai_jobs=1)
    monkeypatch.setattr(timezone, "now", lambda: instant + dt.timedelta(hours=11, minutes=59))
    assert error_code(los_angeles.job()) == "DAILY_JOB_LIMIT_EXCEEDED"
    monkeypatch.setattr(timezone, "now", lambda: instant + dt.timedelta(hours=12, minutes=1))
    assert los_angeles.job().status_code == 201
    assert UserAiUsage.objects.filter(user=los_angeles.user, local_date=dt.date(2099, 12, 1)).exists()


def test_a_results_tokens_count_on_the_day_its_job_was_counted(monkeypatch):
    learner = Learner()
    # 23:59 in Shanghai, in the future: model defaults (available_at) still use the real clock.
    before_midnight = dt.datetime(2099, 11, 30, 15, 59, tzinfo=dt.UTC)
    monkeypatch.setattr(timezone, "now", lambda: before_midnight)
    # Set on the fake clock, where UTC and Shanghai share the date: no quota move, whatever
    # the real hour (from 16:00 UTC the real dates differ and the move leaves rows behind).
    learner.patch("/ai/settings", {"timezone": "Asia/Shanghai"})
    job_id = learner.job().json()["jobId"]
    monkeypatch.setattr(timezone, "now", lambda: before_midnight + dt.timedelta(minutes=2))
    runtime = RuntimeClient("runtime-1")
    runtime.lock(job_id)
    runtime.result(
        job_id, 1, VALID_OUTPUTS["learning_state_analysis"], usage={"promptTokens": 70, "completionTokens": 7}
    )
    usage = UserAiUsage.objects.get(user=learner.user)
    assert (usage.local_date, usage.job_count, usage.tokens_used) == (dt.date(2099, 11, 30), 1, 77)
