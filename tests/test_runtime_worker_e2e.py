"""The reference runtime end to end: gunicorn on the test PostgreSQL database, the
stand-in model, and runtimes as threads or real processes. Jobs are created with
the ORM and watched in the database until they reach a final status."""

from __future__ import annotations

import logging
import signal
import uuid
from pathlib import Path

import pytest
import requests

from accounts.selectors import public_id_of
from ai_jobs import output_schemas, services
from ai_jobs.models import AiInvocationLog, AiRuntimeJob, AiRuntimeResult
from tests.support import runtime_fixtures
from tests.support.api import ALL_TYPES
from tests.support.factories import JobFactory, UserFactory, consent
from tests.support.runtime_e2e import final, make_job, standin_requests
from tests.support.runtime_fixtures import LEASE_SECONDS, PLATFORM_KEY, spawn_runtime, wait_for

# The servers and runtimes of tests/support/runtime_fixtures.py, as this module's fixtures.
api_server = runtime_fixtures.api_server
standin = runtime_fixtures.standin
start_runtime = runtime_fixtures.start_runtime
_no_leftover_faults = runtime_fixtures._no_leftover_faults

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_each_job_type_goes_from_created_to_succeeded_with_its_result_stored(start_runtime, standin, caplog):
    caplog.set_level(logging.DEBUG)
    user = UserFactory()
    jobs = [make_job(job_type, user=user, params={"questionCount": 3, "cardCount": 4}) for job_type in ALL_TYPES * 2]
    start_runtime("rt-a")
    start_runtime("rt-b")
    for job in jobs:
        done = final(job)
        assert done.status == "succeeded", (done.error_code, done.error_message)
        assert done.attempt_no == 1 and done.started_at is not None
        result = AiRuntimeResult.objects.get(job=done)
        assert output_schemas.validation_errors(done.job_type, "v1", result.output) == []
        assert result.prompt_tokens > 0 and result.completion_tokens > 0 and result.cost_cents > 0
        assert result.runtime_instance_id in {"rt-a", "rt-b"}
        log = wait_for(lambda done=done: AiInvocationLog.objects.filter(job=done).first(), what="invocation log")
        assert log.http_status == 200 and log.error_code is None and log.total_tokens == result.total_tokens
    questions = AiRuntimeResult.objects.get(job=jobs[3]).output["questions"]
    assert len(questions) == 3
    assert len(AiRuntimeResult.objects.get(job=jobs[4]).output["flashcards"]) == 4
    assert PLATFORM_KEY not in caplog.text


RECORDS = {
    "learning_state_analysis": "analyses",
    "weak_point_analysis": "weak-points",
    "next_action_planning": "recommendations",
    "quiz_generation": "quizzes",
    "flashcard_generation": "flashcards",
}


def test_jobs_created_through_the_user_api_end_with_their_records(api_server, start_runtime, standin, settings):
    # The server checks passwords with Django's default hashers, not the tests' fast MD5.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = UserFactory(password="pw-e2e-123456")
    consent(user)
    session = requests.Session()
    login = session.post(f"{api_server}/auth/token", json={"username": user.username, "password": "pw-e2e-123456"})
    assert login.status_code == 200, login.text
    session.headers["Authorization"] = f"Bearer {login.json()['access']}"
    kb = session.post(f"{api_server}/learning/knowledge-bases", json={"name": "Fractions", "description": "Parts"})
    assert kb.status_code == 201, kb.text
    job_ids = {}
    for job_type, kind in RECORDS.items():
        on_kb = job_type in ("quiz_generation", "flashcard_generation")
        body = {
            "jobType": job_type,
            "targetType": "knowledge_base" if on_kb else "user",
            "targetId": kb.json()["id"] if on_kb else public_id_of(user),
            "apiKeyMode": "platform_key",
            "idempotencyKey": uuid.uuid4().hex,
            **({"questionCount": 3, "cardCount": 3} if on_kb else {}),
        }
        created = session.post(f"{api_server}/ai/jobs", json=body)
        assert created.status_code == 201, created.text
        job_ids[kind] = created.json()["jobId"]
    start_runtime("rt-a")
    start_runtime("rt-b")
    for kind, job_id in job_ids.items():
        done = final(AiRuntimeJob(id=job_id))
        assert done.status == "succeeded", (done.error_code, done.error_message)
        assert session.get(f"{api_server}/ai/jobs/{job_id}").json()["status"] == "succeeded"
        records = session.get(f"{api_server}/ai/{kind}", params={"jobId": job_id})
        assert records.status_code == 200 and records.json()["results"], (kind, records.text)


def test_a_rate_limited_model_call_is_retried_and_the_job_succeeds(start_runtime, standin):
    nonce = uuid.uuid4().hex
    standin.model.add_faults([{"status": 429, "match": nonce}])
    job = make_job(params={"case": nonce})
    start_runtime("rt-a")
    done = final(job)
    assert done.status == "succeeded"
    assert done.retry_count == 1 and done.attempt_no == 2
    logs = AiInvocationLog.objects.filter(job=done).order_by("attempt_no")
    wait_for(lambda: logs.count() == 2, what="both attempts' invocation logs")  # sent after the result
    assert list(logs.values_list("error_code", flat=True)) == ["MODEL_RATE_LIMIT", None]


@pytest.mark.parametrize(
    ("marker", "code"),
    [
        ("[standin:bad_json]", "MODEL_JSON_PARSE_FAILED"),
        ("[standin:invalid_output]", "MODEL_RESPONSE_INVALID"),
    ],
)
def test_a_model_answer_that_is_not_usable_fails_the_job_for_good(start_runtime, standin, marker, code):
    job = make_job(params={"note": marker})
    start_runtime("rt-a")
    done = final(job)
    assert (done.status, done.error_code, done.retry_count) == ("failed", code, 0)
    assert not AiRuntimeResult.objects.filter(job=done).exists()
    log = wait_for(lambda: AiInvocationLog.objects.filter(job=done).first(), what="invocation log")
    assert log.error_code == code and log.total_tokens > 0


def test_a_model_that_keeps_failing_with_5xx_uses_up_the_retries(start_runtime, standin):
    job = make_job(params={"note": "[standin:503]"}, max_retry_count=1)
    start_runtime("rt-a")
    done = final(job)
    assert (done.status, done.error_code, done.retry_count, done.attempt_no) == ("failed", "MODEL_TIMEOUT", 1, 2)


def test_a_cancel_during_the_model_call_ends_the_job_cancelled(start_runtime, standin):
    job = make_job(params={"note": "[standin:delay=30]"})
    start_runtime("rt-a")
    wait_for(lambda: standin_requests(standin) >= 1, what="the model call")
    services.jobs_cancel(job_ids=[job.id])
    done = final(job, timeout=20)
    assert (done.status, done.error_code) == ("cancelled", "JOB_CANCELLED")
    assert not AiRuntimeResult.objects.filter(job=done).exists()


def test_a_model_call_that_outlives_the_jobs_timeout_is_model_timeout_and_is_retried(start_runtime, standin):
    job = make_job(params={"note": "[standin:delay=30]"}, timeout_seconds=2, max_retry_count=1)
    start_runtime("rt-a")
    done = final(job, timeout=20)
    # Reported before the attempt's deadline, so the server took it: retried once, then final.
    assert (done.status, done.error_code, done.retry_count, done.attempt_no) == ("failed", "MODEL_TIMEOUT", 1, 2)


def test_jobs_the_runtime_cannot_run_fail_with_their_codes(start_runtime, standin):
    unsupported = make_job(prompt_version="v999")
    no_credential = make_job(api_key_mode="user_deepseek_key", credential_id=None)
    start_runtime("rt-a")
    assert final(unsupported).error_code == "UNSUPPORTED_JOB_TYPE"
    assert final(no_credential).error_code == "CREDENTIAL_RESOLVE_FAILED"
    assert {final(unsupported).status, final(no_credential).status} == {"failed"}
    assert standin_requests(standin) == 0


def test_a_result_the_api_did_not_take_or_whose_answer_was_lost_is_resent_and_stored_once(
    api_server, start_runtime, standin
):
    # Down twice before the result reaches the server, then the answer of the one that did is lost.
    proxy = runtime_fixtures.FlakyProxy(
        api_server, [("/result", "502"), ("/result", "drop_before"), ("/result", "drop_after")]
    )
    try:
        job = make_job()
        runtime = start_runtime("rt-proxied", api_url=proxy.base_url)
        wait_for(lambda: runtime.stats["succeeded"] == 1, what="the runtime to get its result through")
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert [status for _, _, status in proxy.calls("/result")] == [502, None, None, 200]
    done = AiRuntimeJob.objects.get(id=job.id)
    assert (done.status, done.attempt_no, done.retry_count) == ("succeeded", 1, 0)
    assert AiRuntimeResult.objects.filter(job=done).count() == 1
    assert not runtime.stats["abandoned"]


def test_a_runtime_that_lost_its_lease_abandons_the_job_quietly(start_runtime, standin, caplog):
    caplog.set_level(logging.INFO, logger="runtime_worker")
    nonce = uuid.uuid4().hex
    standin.model.add_faults([{"delay": LEASE_SECONDS + 2.0, "match": nonce}])
    job = make_job(params={"case": nonce})
    # Its one heartbeat is the first; the lease lapses during the slow model call.
    slow = start_runtime("rt-slow", heartbeat_seconds=600, concurrency=1)
    wait_for(lambda: standin_requests(standin) >= 1, what="the model call")
    wait_for(lambda: services.jobs_reap().get("pending", 0) == 1, every=0.2, what="the reaper")
    start_runtime("rt-b")
    done = final(job)
    assert done.status == "succeeded" and done.attempt_no == 2
    assert AiRuntimeResult.objects.get(job=done).runtime_instance_id == "rt-b"
    wait_for(lambda: slow.stats["abandoned"] == 1, what="the slow runtime to give up")
    assert slow.stats["succeeded"] == 0
    assert not [r for r in caplog.records if r.name.startswith("runtime_worker") and r.levelno >= logging.ERROR]


def test_sigterm_lets_a_running_job_finish_then_reports_what_outlives_the_grace(api_server, standin, tmp_path: Path):
    quick, slow = uuid.uuid4().hex, uuid.uuid4().hex
    standin.model.add_faults([{"delay": 1.5, "match": quick}, {"delay": 60, "match": slow, "times": None}])
    log = tmp_path / "runtime.log"

    finishing = make_job(params={"case": quick})
    process = spawn_runtime(api_server, "rt-term-1", log, grace=20)
    wait_for(lambda: standin_requests(standin) >= 1, what="the model call")
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert final(finishing).status == "succeeded"

    outliving = make_job(params={"case": slow})
    process = spawn_runtime(api_server, "rt-term-2", log, grace=0.5)
    wait_for(lambda: standin_requests(standin) >= 2, what="the model call")
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    job = AiRuntimeJob.objects.get(id=outliving.id)
    assert (job.status, job.error_code, job.retry_count) == ("pending", "RUNTIME_SHUTDOWN", 1)
    services.jobs_cancel(job_ids=[job.id])
    assert PLATFORM_KEY not in log.read_text()


def test_a_runtime_killed_in_the_middle_of_200_jobs_loses_none_and_doubles_none(api_server, standin, tmp_path: Path):
    standin.model.add_faults([{"delay": 0.1, "times": None}])  # most of a job's time is its model call
    user = UserFactory()
    jobs = JobFactory.create_batch(200, user=user, target_id=public_id_of(user))
    victim = spawn_runtime(api_server, "rt-victim", tmp_path / "victim.log", concurrency=4)
    survivor = spawn_runtime(api_server, "rt-survivor", tmp_path / "survivor.log", concurrency=4)
    try:
        wait_for(
            lambda: AiRuntimeResult.objects.filter(runtime_instance_id="rt-victim").count() >= 20,
            what="the victim to do some work",
        )
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        held = set(
            AiRuntimeJob.objects.filter(locked_by="rt-victim", status__in=["locked", "running"]).values_list(
                "id", flat=True
            )
        )

        def all_done() -> bool:
            services.jobs_reap()  # what Celery beat does every AI_JOB_REAPER_INTERVAL_SECONDS
            return not AiRuntimeJob.objects.exclude(status="succeeded").exists()

        wait_for(all_done, timeout=120, every=0.5, what="every job to succeed")
    finally:
        survivor.send_signal(signal.SIGTERM)
        survivor.wait(timeout=30)
    ids = {job.id for job in jobs}
    results = list(AiRuntimeResult.objects.values_list("job_id", flat=True))
    assert len(results) == len(set(results)) == 200 and set(results) == ids
    assert AiRuntimeJob.objects.filter(id__in=ids, status="succeeded").count() == 200
    assert AiRuntimeResult.objects.filter(runtime_instance_id="rt-survivor").exists()
    # What the victim held when it died was reaped and finished by the survivor in a later attempt,
    # unless the victim's result call was already on its way to the server.
    reaped = AiRuntimeJob.objects.filter(id__in=held, retry_count__gte=1, attempt_no__gte=2)
    assert reaped.exists(), "no job of the victim went back through the reaper"
    for job in AiRuntimeJob.objects.filter(id__in=held).select_related("result"):
        retried = job.retry_count >= 1 and job.result.runtime_instance_id == "rt-survivor"
        assert retried or (job.attempt_no == 1 and job.result.runtime_instance_id == "rt-victim")
