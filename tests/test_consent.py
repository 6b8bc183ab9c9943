"""Consent: AI analysis is opt-in, and
once a job's cancel is requested (the user's cancel, or AI analysis turned off) the
runtime gets nothing more of the learner's and nothing it sends back is kept."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from ai_jobs import snapshots
from ai_jobs.models import AiJobSnapshot, AiRuntimeJob, AiRuntimeResult, Flashcard, QuizQuestion
from quotas import selectors as quota_selectors
from quotas.models import UserAiSettings, UserAiUsage
from runtime_worker import prompts
from tests.support.api import RuntimeClient, error_code
from tests.support.factories import VALID_OUTPUTS, JobFactory, UserFactory
from tests.support.learning_factories import KnowledgePointFactory
from tests.support.user_api import Learner

pytestmark = pytest.mark.django_db

RESULTS = ["/ai/analyses", "/ai/weak-points", "/ai/recommendations", "/ai/quizzes", "/ai/flashcards"]


def _results(learner: Learner) -> dict[str, list]:
    return {path: learner.get(path).json()["results"] for path in RESULTS}


def _held(learner: Learner, runtime: RuntimeClient, *, quiz: bool = False, **body) -> dict:
    """A job created through the API, claimed by the runtime and running."""
    created = learner.quiz(**body) if quiz else learner.job(**body)
    assert created.status_code == 201, created.json()
    [job] = runtime.claim().json()["jobs"]
    assert runtime.heartbeat(job["jobId"]).status_code == 200
    return job


def test_a_fresh_user_cannot_create_a_job_until_they_turn_ai_analysis_on():
    learner = Learner(consented=False)
    assert learner.get("/ai/settings").json()["aiAnalysisEnabled"] is False
    refused = learner.job()
    assert refused.status_code == 400 and error_code(refused) == "AI_ANALYSIS_DISABLED"
    assert not AiRuntimeJob.objects.exists()
    assert learner.patch("/ai/settings", {"aiAnalysisEnabled": True}).json()["aiAnalysisEnabled"] is True
    assert learner.job().status_code == 201


def test_a_deployment_may_turn_ai_analysis_on_for_new_users(settings):
    settings.AI_ANALYSIS_ENABLED_BY_DEFAULT = True
    assert Learner(consented=False).job().status_code == 201


def test_turning_ai_off_while_a_runtime_holds_the_job_cancels_it_at_the_snapshot_call(runtime):
    learner = Learner()
    KnowledgePointFactory(knowledge_base__user=learner.user)
    job = _held(learner, runtime)
    before = _results(learner)
    assert learner.patch("/ai/settings", {"aiAnalysisEnabled": False}).status_code == 200
    assert runtime.heartbeat(job["jobId"]).json()["cancelRequested"] is True
    snapshot = runtime.get(f"jobs/{job['jobId']}/snapshot")
    assert snapshot.status_code == 409 and error_code(snapshot) == "JOB_NOT_ACTIVE"
    assert "cancel" in snapshot.json()["error"]["message"]
    stored = AiRuntimeJob.objects.get(id=job["jobId"])
    assert (stored.status, stored.error_code, stored.finished_at is not None) == ("cancelled", "JOB_CANCELLED", True)
    # The runtime can do nothing more with it, and nothing was published.
    assert error_code(runtime.post(f"jobs/{job['jobId']}/credential")) == "JOB_NOT_ACTIVE"
    late = runtime.result(job["jobId"], job["attemptNo"], VALID_OUTPUTS["learning_state_analysis"])
    assert late.status_code == 409 and error_code(late) == "JOB_NOT_ACTIVE"
    assert _results(learner) == before == {path: [] for path in RESULTS}
    assert learner.get(f"/ai/jobs/{job['jobId']}").json()["status"] == "cancelled"


def test_a_cancel_requested_job_is_cancelled_at_the_credential_call(runtime):
    learner = Learner()
    job = _held(learner, runtime)
    assert runtime.get(f"jobs/{job['jobId']}/snapshot").status_code == 200
    cancelled = learner.client.post(f"/ai/jobs/{job['jobId']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["cancelRequested"] is True
    credential = runtime.post(f"jobs/{job['jobId']}/credential")
    assert credential.status_code == 409 and error_code(credential) == "JOB_NOT_ACTIVE"
    assert "apiKey" not in credential.json()
    assert AiRuntimeJob.objects.get(id=job["jobId"]).status == "cancelled"


def test_a_result_after_consent_was_withdrawn_stores_publishes_and_charges_nothing(runtime):
    learner = Learner()
    job = _held(learner, runtime, quiz=True)
    assert runtime.get(f"jobs/{job['jobId']}/snapshot").status_code == 200
    assert runtime.post(f"jobs/{job['jobId']}/credential").status_code == 200
    before = _results(learner)
    # The model is answering when the learner withdraws.
    assert learner.patch("/ai/settings", {"aiAnalysisEnabled": False}).status_code == 200
    response = runtime.result(
        job["jobId"],
        job["attemptNo"],
        VALID_OUTPUTS["quiz_generation"],
        usage={"promptTokens": 400, "completionTokens": 100},
        costCents="1.5",
    )
    assert response.status_code == 409 and error_code(response) == "JOB_NOT_ACTIVE"
    stored = AiRuntimeJob.objects.get(id=job["jobId"])
    assert (stored.status, stored.error_code) == ("cancelled", "JOB_CANCELLED")
    assert not AiRuntimeResult.objects.exists() and not QuizQuestion.objects.exists()
    assert _results(learner) == before
    usage = UserAiUsage.objects.get(user=learner.user, api_key_mode="platform_key")
    assert (usage.tokens_used, usage.cost_cents) == (0, Decimal(0))
    assert quota_selectors.platform_usage_today().tokens_used == 0
    # The same result again is still refused: it is not a duplicate of anything stored.
    again = runtime.result(job["jobId"], job["attemptNo"], VALID_OUTPUTS["quiz_generation"])
    assert again.status_code == 409 and not AiRuntimeResult.objects.exists()


def test_a_job_that_slipped_past_turning_ai_off_is_cancelled_when_the_runtime_asks_for_its_data(runtime):
    # A job created while the learner was turning AI off (their settings changed after
    # the job's check, before it committed) was never flagged: consent is read again.
    learner = Learner()
    job = _held(learner, runtime)
    UserAiSettings.objects.filter(user=learner.user).update(ai_analysis_enabled=False)
    snapshot = runtime.get(f"jobs/{job['jobId']}/snapshot")
    assert snapshot.status_code == 409 and AiRuntimeJob.objects.get(id=job["jobId"]).status == "cancelled"


def test_a_result_of_a_job_whose_user_turned_ai_off_unflagged_is_not_stored(runtime):
    learner = Learner()
    job = JobFactory(user=learner.user, job_type="learning_state_analysis")
    lock = runtime.lock(job.id).json()
    UserAiSettings.objects.filter(user=learner.user).update(ai_analysis_enabled=False)
    response = runtime.result(job.id, lock["attemptNo"], VALID_OUTPUTS["learning_state_analysis"])
    assert response.status_code == 409 and AiRuntimeJob.objects.get(id=job.id).status == "cancelled"
    assert not AiRuntimeResult.objects.exists() and not Flashcard.objects.exists()


def test_consent_holding_lets_the_job_succeed(runtime):
    learner = Learner()
    job = _held(learner, runtime)
    assert runtime.get(f"jobs/{job['jobId']}/snapshot").status_code == 200
    assert runtime.post(f"jobs/{job['jobId']}/credential").status_code == 200
    done = runtime.result(job["jobId"], job["attemptNo"], VALID_OUTPUTS["learning_state_analysis"])
    assert done.status_code == 200 and len(learner.get("/ai/analyses").json()["results"]) == 1


def test_an_admin_rerun_of_a_job_whose_user_turned_ai_off_is_refused_with_a_message(runtime):
    learner = Learner()
    job = JobFactory(user=learner.user)
    lock = runtime.lock(job.id).json()
    assert runtime.fail(job.id, lock["attemptNo"], "INVALID_SNAPSHOT").json()["status"] == "failed"
    assert learner.patch("/ai/settings", {"aiAnalysisEnabled": False}).status_code == 200
    admin = Client()
    admin.force_login(UserFactory(is_staff=True, is_superuser=True))
    page = admin.post(
        "/admin/ai_jobs/airuntimejob/",
        {"action": "rerun_failed", "_selected_action": [job.id]},
        follow=True,
    )
    assert page.status_code == 200
    messages = [str(message) for message in page.context["messages"]]
    assert any("AI analysis turned off" in message and job.id in message for message in messages), messages
    assert not AiRuntimeJob.objects.filter(retried_from_job=job).exists()
    # Once the learner turns it on again, the operator's rerun goes through.
    learner.patch("/ai/settings", {"aiAnalysisEnabled": True})
    admin.post("/admin/ai_jobs/airuntimejob/", {"action": "rerun_failed", "_selected_action": [job.id]})
    assert AiRuntimeJob.objects.filter(retried_from_job=job).count() == 1


def test_snapshots_and_prompts_never_carry_the_username_or_email(runtime):
    learner = Learner(username="ada.secret-handle", email="ada.private@example.com")
    KnowledgePointFactory(knowledge_base__user=learner.user, name="Fractions")
    job = _held(learner, runtime)
    body = runtime.get(f"jobs/{job['jobId']}/snapshot").json()
    text = str(body) + str(AiJobSnapshot.objects.get().payload)
    assert "ada.secret-handle" not in text and "ada.private" not in text and "Fractions" in text
    assert body["data"]["learner"] == {"userId": body["userId"]} and body["userId"].startswith("usr_")
    prompt = prompts.render(
        job_type=job["jobType"],
        prompt_version=job["promptVersion"],
        output_schema_version=job["outputSchemaVersion"],
        target_type=job["targetType"],
        target_id=job["targetId"],
        snapshot=body["data"],
        params=job["params"],
    )
    assert "ada.secret-handle" not in prompt.system + prompt.user and "ada.private" not in prompt.system + prompt.user
    assert "username" not in snapshots.build_data(user=learner.user, target_type="user", target_id="me")["learner"]


def test_make_runs_bootstrap_account_has_ai_analysis_on(capsys, settings):
    settings.DEBUG = True  # make run's setting: dev_bootstrap refuses to run without it
    call_command("dev_bootstrap", username="admin", password="admin", port=8000)
    user = get_user_model().objects.get(username="admin")
    assert quota_selectors.ai_settings_get(user=user).ai_analysis_enabled is True
