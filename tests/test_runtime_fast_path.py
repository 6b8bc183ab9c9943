"""The claim fast path: ``claim`` with ``include`` hands out jobs already
``running``, each with exactly the bodies the separate snapshot and credential calls
give, under the same consent, breaker and credential rules; and the read path's
statement counts (snapshot, credential, claim with include)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ai_jobs import pauses
from ai_jobs.models import AiJobSnapshot, AiRuntimeJob
from ai_jobs.snapshots import snapshot_create
from config.errors import RuntimeErrorCode
from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import CircuitState, UserAiSettings
from tests.support.api import ALL_TYPES, RuntimeClient, error_code
from tests.support.credentials import make_credential
from tests.support.factories import VALID_OUTPUTS, JobFactory

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

JOB_FIELDS = {
    "jobId", "jobType", "targetType", "targetId", "userId", "status", "priority", "apiKeyMode", "credentialId",
    "modelProvider", "modelName", "promptVersion", "outputSchemaVersion", "attemptNo", "retryCount",
    "maxRetryCount", "timeoutSeconds", "params", "lockUntil", "createdAt",
}  # fmt: skip


def _claim(runtime: RuntimeClient, include: object, *, limit: int = 10, capabilities: list[str] | None = None):
    return runtime.post("jobs/claim", {"capabilities": capabilities or ALL_TYPES, "limit": limit, "include": include})


def _with_snapshot(job: AiRuntimeJob) -> AiRuntimeJob:
    snapshot = snapshot_create(user=job.user, target_type=job.target_type, target_id=job.target_id)
    AiRuntimeJob.objects.filter(id=job.id).update(snapshot=snapshot)
    return job


def test_claim_with_include_hands_out_running_jobs_with_what_the_separate_calls_give(runtime, settings):
    job = JobFactory()
    response = _claim(runtime, ["snapshot", "credential"])
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    [claimed] = response.json()["jobs"]
    assert set(claimed) == JOB_FIELDS | {"snapshot", "credential"}
    assert claimed["jobId"] == job.id and claimed["status"] == "running" and claimed["attemptNo"] == 1
    stored = AiRuntimeJob.objects.get(id=job.id)
    assert stored.status == "running" and stored.started_at is not None and stored.locked_by == runtime.instance_id
    assert claimed["lockUntil"] == int(stored.lock_until.timestamp() * 1000)
    # Built once, at the claim: the separate call now reads the same stored snapshot.
    assert claimed["snapshot"] == runtime.get(f"jobs/{job.id}/snapshot").json()
    assert claimed["snapshot"]["data"]["learner"]["userId"] == claimed["userId"]
    assert AiJobSnapshot.objects.count() == 1
    assert claimed["credential"] == runtime.post(f"jobs/{job.id}/credential").json()
    assert claimed["credential"]["apiKey"] == settings.PLATFORM_DEEPSEEK_API_KEY
    # The job's life is then heartbeats and the result.
    beat = runtime.heartbeat(job.id)
    assert beat.status_code == 200 and beat.json()["cancelRequested"] is False
    result = runtime.result(job.id, 1, VALID_OUTPUTS[job.job_type])
    assert result.status_code == 200 and result.json()["status"] == "succeeded"


def test_claim_with_include_carries_only_what_was_asked_for(runtime):
    first, second = JobFactory(), JobFactory()
    [snapshot_only] = _claim(runtime, ["snapshot"], limit=1).json()["jobs"]
    assert snapshot_only["jobId"] == first.id and "snapshot" in snapshot_only and "credential" not in snapshot_only
    response = _claim(runtime, ["credential"], limit=1)
    [credential_only] = response.json()["jobs"]
    assert credential_only["jobId"] == second.id and "credential" in credential_only
    assert "snapshot" not in credential_only and response["Cache-Control"] == "no-store"
    assert set(AiRuntimeJob.objects.values_list("status", flat=True)) == {"running"}
    # Without include, claim is what it always was: locked, no extras.
    third = JobFactory()
    [plain] = runtime.claim().json()["jobs"]
    assert plain["jobId"] == third.id and plain["status"] == "locked" and set(plain) == JOB_FIELDS


def test_claim_with_a_user_key_job_includes_the_users_decrypted_key(runtime, user):
    credential = make_credential(user, api_key="sk-user-own-key-0123456789")
    job = JobFactory(user=user, api_key_mode="user_deepseek_key", credential_id=credential.id)
    [claimed] = _claim(runtime, ["credential"]).json()["jobs"]
    assert claimed["credential"]["apiKey"] == "sk-user-own-key-0123456789"
    assert claimed["credential"] == runtime.post(f"jobs/{job.id}/credential").json()


@pytest.mark.parametrize("include", [["snapshot", "prompt"], "snapshot", [""], {"snapshot": True}], ids=str)
def test_claim_with_an_unknown_or_malformed_include_is_a_validation_error_and_claims_nothing(runtime, include):
    job = JobFactory()
    response = _claim(runtime, include)
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert "include" in response.json()["error"]["fields"]
    assert AiRuntimeJob.objects.get(id=job.id).status == "pending"


def test_claim_with_include_cancels_a_job_whose_consent_was_withdrawn_as_the_snapshot_call_does(runtime):
    withdrawn, kept = JobFactory(), JobFactory()
    # Consent withdrawn as the job is claimed (turning it off through the API cancels pending jobs at once).
    UserAiSettings.objects.filter(user=withdrawn.user).update(ai_analysis_enabled=False)
    response = _claim(runtime, ["snapshot", "credential"])
    assert [job["jobId"] for job in response.json()["jobs"]] == [kept.id]
    withdrawn.refresh_from_db()
    assert withdrawn.status == "cancelled" and withdrawn.error_code == "JOB_CANCELLED" and withdrawn.snapshot is None


def test_claim_with_include_fails_a_job_whose_credential_cannot_be_resolved_as_the_runtime_would(runtime):
    gone = JobFactory(api_key_mode="user_deepseek_key", credential_id="cred_gone")
    kept = JobFactory()
    response = _claim(runtime, ["snapshot", "credential"])
    assert [job["jobId"] for job in response.json()["jobs"]] == [kept.id]
    gone.refresh_from_db()
    code = RuntimeErrorCode.CREDENTIAL_RESOLVE_FAILED
    assert gone.error_code == code.code and "CREDENTIAL_NOT_FOUND" in gone.error_message
    assert gone.status == ("pending" if code.retryable else "failed")
    # Without the credential, the same job is handed out: the snapshot alone does not need it.
    other = JobFactory(api_key_mode="user_deepseek_key", credential_id="cred_gone")
    assert [job["jobId"] for job in _claim(runtime, ["snapshot"]).json()["jobs"]] == [other.id]


def test_claim_with_include_passes_over_platform_jobs_while_the_breaker_is_open(runtime, user):
    platform = JobFactory()
    credential = make_credential(user)
    own_key = JobFactory(user=user, api_key_mode="user_deepseek_key", credential_id=credential.id)
    quotas.breaker_transition(to=CircuitState.OPEN, actor="system", reason="the provider answers 503")
    assert [job["jobId"] for job in _claim(runtime, ["snapshot", "credential"]).json()["jobs"]] == [own_key.id]
    assert AiRuntimeJob.objects.get(id=platform.id).status == "pending"


# --- statements ----------------------------------------------------------------------------


def _statements(call) -> tuple[object, list[str]]:
    """The statements a request runs after authentication and throttling (without Redis,
    the embedded default counts its throttle windows in the database)."""
    with CaptureQueriesContext(connection) as queries:
        response = call()
    return response, [q["sql"] for q in queries.captured_queries if "quotas_throttle_window" not in q["sql"]]


def test_snapshot_and_credential_are_one_statement_each(runtime, user):
    credential = make_credential(user)
    job = JobFactory(user=user, api_key_mode="user_deepseek_key", credential_id=credential.id)
    assert runtime.lock(job.id).status_code == 200
    assert runtime.get(f"jobs/{job.id}/snapshot").status_code == 200  # built on the first call
    response, statements = _statements(lambda: runtime.get(f"jobs/{job.id}/snapshot"))
    assert response.status_code == 200 and len(statements) == 1, statements
    response, statements = _statements(lambda: runtime.post(f"jobs/{job.id}/credential"))
    assert response.status_code == 200 and len(statements) == 1, statements


def test_claim_with_include_is_two_statements_whatever_the_number_of_jobs(runtime, user):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no arrays: it locks and reads the jobs of a claim one statement each")
    credential = make_credential(user)
    jobs = [_with_snapshot(JobFactory()) for _ in range(4)]
    jobs.append(_with_snapshot(JobFactory(user=user, api_key_mode="user_deepseek_key", credential_id=credential.id)))
    quota_selectors.breaker_state_hint()  # the breaker's state as the process already knows it (read at most once a second)
    pauses.paused_types()  # and the paused job types (read at most every few seconds)
    response, statements = _statements(lambda: _claim(runtime, ["snapshot", "credential"], limit=len(jobs)))
    assert response.status_code == 200 and len(response.json()["jobs"]) == len(jobs)
    assert len(statements) == 2, statements  # the claim's UPDATE, then one read of every job's snapshot and key
