"""Contract §3, "a lost answer costs nothing", through DRF's client: a claim sent again
with its ``claimId`` answers the jobs it took (untouched since) and locks nothing
more; a ``fail`` sent again once taken answers what it did; a stale attempt's
``result`` or ``fail`` is ``JOB_NOT_ACTIVE`` whatever became of the later attempt.
The same rules through a fault-injecting proxy and the reference runtime are
tests/test_faults_network.py's."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from ai_jobs.models import AiRuntimeJob, AiRuntimeResult
from ai_jobs.services import claims
from tests.support.api import ALL_TYPES, RuntimeClient, error_code
from tests.support.credentials import make_credential
from tests.support.factories import VALID_OUTPUTS, JobFactory

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

OUTPUT = VALID_OUTPUTS["learning_state_analysis"]


@pytest.fixture(autouse=True)
def _claims_settle_soon(monkeypatch):
    """A claim sent again that finds none of its jobs asks again until the first settled:
    a moment here, the tests' claims being quick."""
    monkeypatch.setattr(claims, "CLAIM_SETTLE_SECONDS", 0.2)


def _claim(runtime: RuntimeClient, claim_id: str | None, *, limit: int = 10, include: list[str] | None = None):
    body: dict = {"capabilities": ALL_TYPES, "limit": limit}
    if claim_id is not None:
        body["claimId"] = claim_id
    if include:
        body["include"] = include
    return runtime.post("jobs/claim", body)


def _ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [job["jobId"] for job in response.json()["jobs"]]


def _lapse(job_id: str) -> None:
    AiRuntimeJob.objects.filter(id=job_id).update(lock_until=timezone.now() - dt.timedelta(seconds=1))


# --- claimId --------------------------------------------------------------------------------


def test_a_claim_sent_again_answers_the_same_jobs_and_locks_nothing_more(runtime):
    jobs = JobFactory.create_batch(5)
    first = _claim(runtime, "claim-1", limit=2)
    again = _claim(runtime, "claim-1", limit=2)
    assert _ids(again) == _ids(first) == [job.id for job in jobs[:2]]
    assert again.json() == first.json()  # the same attempts, with their leases as they are
    assert {job["attemptNo"] for job in again.json()["jobs"]} == {1}
    assert AiRuntimeJob.objects.filter(status="pending").count() == 3
    assert AiRuntimeJob.objects.filter(status="locked", attempt_no=1, retry_count=0).count() == 2
    assert _ids(_claim(runtime, "claim-2", limit=2)) == [job.id for job in jobs[2:4]]  # a new claimId claims anew


def test_the_same_claim_id_from_another_instance_is_an_ordinary_claim(runtime, other_runtime):
    jobs = JobFactory.create_batch(3)
    assert _ids(_claim(runtime, "shared-id", limit=2)) == [jobs[0].id, jobs[1].id]
    assert _ids(_claim(other_runtime, "shared-id", limit=2)) == [jobs[2].id]
    assert AiRuntimeJob.objects.get(id=jobs[2].id).locked_by == "runtime-2"


def test_a_job_touched_since_its_claim_is_not_answered_again(runtime):
    """A heartbeat, a snapshot or credential call, a result or a fail shows the claim's
    answer arrived: the claim sent again answers only the jobs untouched."""
    credential = make_credential(JobFactory().user)
    AiRuntimeJob.objects.all().delete()
    beat, snapshot, keyed, done, failed, untouched = JobFactory.create_batch(6)
    AiRuntimeJob.objects.filter(id=keyed.id).update(
        api_key_mode="user_deepseek_key", credential_id=credential.id, user_id=credential.user_id
    )
    assert len(_ids(_claim(runtime, "claim-t"))) == 6
    assert runtime.heartbeat(beat.id).status_code == 200
    assert runtime.get(f"jobs/{snapshot.id}/snapshot").status_code == 200
    assert runtime.post(f"jobs/{keyed.id}/credential").status_code == 200
    assert runtime.result(done.id, 1, OUTPUT).status_code == 200
    assert runtime.fail(failed.id, 1, "MODEL_TIMEOUT").status_code == 200
    assert _ids(_claim(runtime, "claim-t")) == [untouched.id]
    runtime.heartbeat(untouched.id)
    JobFactory()  # due, but the claim sent again locks nothing more
    assert _ids(_claim(runtime, "claim-t")) == []
    assert AiRuntimeJob.objects.filter(status="pending", attempt_no=0).count() == 1


def test_a_claim_that_found_nothing_sent_again_still_locks_nothing(runtime):
    assert _ids(_claim(runtime, "empty-claim")) == []
    job = JobFactory()
    assert _ids(_claim(runtime, "empty-claim")) == []
    assert _ids(_claim(runtime, "next-claim")) == [job.id]


def test_a_claim_sent_again_answers_no_job_whose_lease_lapsed_or_that_went_back_to_pending(runtime):
    lapsed, retried, held = JobFactory.create_batch(3)
    _ids(_claim(runtime, "claim-l"))
    _lapse(lapsed.id)
    AiRuntimeJob.objects.filter(id=retried.id).update(status="pending", locked_by=None, lock_until=None)
    assert _ids(_claim(runtime, "claim-l")) == [held.id]


def test_the_fast_path_claim_sent_again_hands_out_snapshot_and_credential_again(runtime, user):
    credential = make_credential(user)
    job = JobFactory(user=user, api_key_mode="user_deepseek_key", credential_id=credential.id)
    first = _claim(runtime, "fast-1", include=["snapshot", "credential"])
    again = _claim(runtime, "fast-1", include=["snapshot", "credential"])
    assert _ids(first) == _ids(again) == [job.id]
    body = again.json()["jobs"][0]
    assert body["status"] == "running" and body["attemptNo"] == 1
    assert (
        body["snapshot"]["jobId"] == job.id
        and body["credential"]["apiKey"] == first.json()["jobs"][0]["credential"]["apiKey"]
    )
    assert again["Cache-Control"] == "no-store"
    # What the claim handed out itself is no touch; a snapshot call of the runtime is.
    assert runtime.get(f"jobs/{job.id}/snapshot").status_code == 200
    assert _ids(_claim(runtime, "fast-1", include=["snapshot", "credential"])) == []


def test_a_replayed_claim_costs_no_retry_and_the_job_runs_to_its_result(runtime):
    job = JobFactory()
    for _ in range(3):  # every answer lost but the last
        answer = _claim(runtime, "claim-r")
    (claimed,) = answer.json()["jobs"]
    assert claimed["attemptNo"] == 1 and claimed["retryCount"] == 0
    assert runtime.heartbeat(job.id).status_code == 200
    assert runtime.result(job.id, 1, OUTPUT).status_code == 200
    job.refresh_from_db()
    assert job.status == "succeeded" and job.attempt_no == 1 and job.retry_count == 0


def test_a_claim_without_a_claim_id_is_never_answered_again(runtime):
    jobs = JobFactory.create_batch(2)
    assert _ids(_claim(runtime, None, limit=1)) == [jobs[0].id]
    assert _ids(_claim(runtime, None, limit=1)) == [jobs[1].id]


@pytest.mark.parametrize("bad", ["", "x" * 65, 123, None, ["a"], True])
def test_a_claim_id_must_be_1_to_64_characters(runtime, bad):
    JobFactory()
    response = runtime.post("jobs/claim", {"capabilities": ALL_TYPES, "claimId": bad})
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert "claimId" in response.json()["error"]["fields"]
    assert not AiRuntimeJob.objects.exclude(status="pending").exists()


def test_a_claim_id_of_64_characters_is_accepted(runtime):
    job = JobFactory()
    assert _ids(_claim(runtime, "é" * 64)) == [job.id]
    assert _ids(_claim(runtime, "é" * 64)) == [job.id]


def test_a_claim_that_failed_leaves_its_claim_id_free(runtime, monkeypatch):
    job = JobFactory()

    def broken(**_kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(claims.transitions, "claim", broken)
    with pytest.raises(RuntimeError):
        claims.job_claim(job_types=ALL_TYPES, limit=10, instance_id="runtime-1", claim_id="claim-f")
    monkeypatch.undo()
    assert _ids(_claim(runtime, "claim-f")) == [job.id]


def test_a_claim_sent_again_while_the_first_is_still_taking_its_jobs_waits_for_them(runtime, monkeypatch):
    """The runtime gave up waiting for a slow claim and sent it again: the second answers
    the first's jobs once they are taken, instead of answering nothing before."""
    monkeypatch.setattr(claims, "CLAIM_SETTLE_SECONDS", 60)
    jobs = JobFactory.create_batch(3)
    assert claims._claim_first_made("runtime-1", "slow-claim") is None  # the first began
    waits = []

    def the_first_takes_its_jobs_meanwhile(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 2:
            claims._claim(job_types=ALL_TYPES, limit=2, instance_id="runtime-1", start=False, claim_id="slow-claim")

    monkeypatch.setattr(claims.time, "sleep", the_first_takes_its_jobs_meanwhile)
    assert _ids(_claim(runtime, "slow-claim")) == [jobs[0].id, jobs[1].id]
    assert len(waits) == 2 and AiRuntimeJob.objects.filter(status="pending").count() == 1


def test_a_claim_that_found_nothing_sent_again_answers_nothing_once_the_first_settled(runtime, monkeypatch):
    monkeypatch.setattr(claims, "CLAIM_SETTLE_SECONDS", 0.3)
    assert _ids(_claim(runtime, "empty-slow")) == []
    JobFactory()
    assert _ids(_claim(runtime, "empty-slow")) == []  # asked until the first settled, then nothing


def test_a_claim_sent_again_after_the_first_failed_is_a_claim_of_its_own():
    assert claims._claim_first_made("runtime-1", "failed-claim") is None
    claims._claim_forget("runtime-1", "failed-claim")
    assert claims._claim_first_made("runtime-1", "failed-claim") is None
    assert claims._claim_first_made("runtime-1", "failed-claim") is not None


# --- a fail sent again ---------------------------------------------------------------------------


def test_a_fail_sent_again_answers_200_with_the_status_it_moved_the_job_to(runtime):
    retried, final = JobFactory(), JobFactory(max_retry_count=0)
    _ids(_claim(runtime, None))
    for job, status in ((retried, "pending"), (final, "failed")):
        first = runtime.fail(job.id, 1, "MODEL_TIMEOUT", "no answer")
        again = runtime.fail(job.id, 1, "MODEL_TIMEOUT", "no answer")
        assert first.status_code == again.status_code == 200
        assert (
            again.json()
            == first.json()
            == {"jobId": job.id, "status": status, "retryCount": 1 if job is retried else 0}
        )
    assert AiRuntimeJob.objects.get(id=retried.id).retry_count == 1  # counted once


def test_a_non_retryable_or_cancelling_fail_sent_again_answers_its_status(runtime):
    invalid, cancelled = JobFactory.create_batch(2)
    _ids(_claim(runtime, None))
    assert runtime.fail(invalid.id, 1, "INVALID_SCHEMA").json()["status"] == "failed"
    assert runtime.fail(invalid.id, 1, "INVALID_SCHEMA").json()["status"] == "failed"
    assert runtime.fail(cancelled.id, 1, "JOB_CANCELLED").json()["status"] == "cancelled"
    assert runtime.fail(cancelled.id, 1, "JOB_CANCELLED").json()["status"] == "cancelled"


def test_a_fail_sent_again_with_another_code_or_after_another_attempt_began_is_not_active(runtime, other_runtime):
    job = JobFactory()
    _ids(_claim(runtime, None))
    assert runtime.fail(job.id, 1, "MODEL_TIMEOUT").status_code == 200
    other_code = runtime.fail(job.id, 1, "MODEL_RATE_LIMIT")
    assert other_code.status_code == 409 and error_code(other_code) == "JOB_NOT_ACTIVE"
    AiRuntimeJob.objects.filter(id=job.id).update(available_at=timezone.now())
    assert other_runtime.lock(job.id).status_code == 200  # attempt 2 began
    late = runtime.fail(job.id, 1, "MODEL_TIMEOUT")
    assert late.status_code == 409 and error_code(late) == "JOB_NOT_ACTIVE"


def test_the_reapers_expiry_is_not_taken_for_the_runtimes_fail(runtime):
    from ai_jobs import services

    job = JobFactory()
    _ids(_claim(runtime, None))
    _lapse(job.id)
    services.jobs_reap()  # back to pending with JOB_TIMEOUT
    late = runtime.fail(job.id, 1, "JOB_TIMEOUT")
    assert late.status_code == 409 and error_code(late) == "JOB_NOT_ACTIVE"


# --- a stale attempt -----------------------------------------------------------------------------


def _stale_then_succeeded(runtime: RuntimeClient, other_runtime: RuntimeClient) -> AiRuntimeJob:
    """Attempt 1 (``runtime``) lapsed; attempt 2 (``other_runtime``) succeeded with OUTPUT."""
    job = JobFactory()
    assert runtime.lock(job.id).status_code == 200
    _lapse(job.id)
    AiRuntimeJob.objects.filter(id=job.id).update(status="pending", locked_by=None, lock_until=None, retry_count=1)
    assert other_runtime.lock(job.id).json()["attemptNo"] == 2
    assert other_runtime.result(job.id, 2, OUTPUT).status_code == 200
    return job


def test_a_stale_attempts_result_with_the_same_output_is_not_active(runtime, other_runtime):
    job = _stale_then_succeeded(runtime, other_runtime)
    late = runtime.result(job.id, 1, OUTPUT)
    assert late.status_code == 409 and error_code(late) == "JOB_NOT_ACTIVE"
    different = runtime.result(job.id, 1, {**OUTPUT, "summary": "another"})
    assert different.status_code == 409 and error_code(different) == "JOB_NOT_ACTIVE"
    assert AiRuntimeResult.objects.filter(job=job).count() == 1


def test_only_the_succeeded_attempts_other_output_is_result_already_exists(runtime, other_runtime):
    job = _stale_then_succeeded(runtime, other_runtime)
    again = other_runtime.result(job.id, 2, OUTPUT)
    assert again.status_code == 200 and again.json()["duplicate"] is True
    different = other_runtime.result(job.id, 2, {**OUTPUT, "summary": "another"})
    assert different.status_code == 409 and error_code(different) == "RESULT_ALREADY_EXISTS"


def test_a_stale_attempts_fail_is_not_active_whatever_became_of_the_later_attempt(runtime, other_runtime):
    job = _stale_then_succeeded(runtime, other_runtime)
    late = runtime.fail(job.id, 1, "MODEL_TIMEOUT")
    assert late.status_code == 409 and error_code(late) == "JOB_NOT_ACTIVE"
    assert AiRuntimeJob.objects.get(id=job.id).status == "succeeded"


def test_the_schema_documents_claim_id_on_the_claim(client):
    schema = client.get("/api/schema", HTTP_ACCEPT="application/json").json()
    body = schema["paths"]["/internal/runtime/jobs/claim"]["post"]["requestBody"]["content"]["application/json"]
    claim = schema["components"]["schemas"][body["schema"]["$ref"].rsplit("/", 1)[-1]]
    field = claim["properties"]["claimId"]
    assert (field["type"], field["minLength"], field["maxLength"]) == ("string", 1, 64)
    assert "claimId" not in claim.get("required", []) and "untouched" in field["description"]


def test_a_claim_whose_claim_id_the_cache_cannot_remember_is_an_ordinary_claim(runtime, monkeypatch, settings):
    if not settings.REDIS_URL:
        pytest.skip("the embedded default remembers a claimId in its database, which the claim itself needs")

    class Down:
        def add(self, *args, **kwargs):
            raise ConnectionError("the cache is down")

        set = delete = get = add

    jobs = JobFactory.create_batch(2)
    monkeypatch.setattr(claims, "cache", Down())
    assert _ids(_claim(runtime, "no-memory", limit=1)) == [jobs[0].id]
    assert _ids(_claim(runtime, "no-memory", limit=1)) == [jobs[1].id]
