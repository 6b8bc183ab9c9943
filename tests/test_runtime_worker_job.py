"""One attempt of the reference runtime (``runtime_worker.job``) and a whole runtime
against a scripted internal API and the real stand-in model: every runtime error code
it reports, what it does with a result the server refuses, its resilience, and its
shutdown."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from typing import Any

import pytest

from ai_jobs import output_schemas
from runtime_worker.api import ApiError, ApiUnavailable
from runtime_worker.job import JobRun
from runtime_worker.model import ModelCall, ModelClient
from tests.support import runtime_fixtures
from tests.support.runtime_fixtures import wait_for
from tests.support.runtime_worker import ScriptedApi, active_jobs, credential, make_job, run_one, scripted_runtime

standin = runtime_fixtures.standin
_no_leftover_faults = runtime_fixtures._no_leftover_faults


def test_a_job_runs_end_to_end_and_reports_usage_cost_and_its_invocation_log(standin):
    api = ScriptedApi(standin.base_url)
    assert run_one(api, make_job()) == "succeeded"
    [result] = api.sent["result"]
    assert result["attempt_no"] == 1 and result["output_schema_version"] == "v1"
    assert output_schemas.validation_errors("learning_state_analysis", "v1", result["output"]) == []
    assert result["usage"]["promptTokens"] > 0 and result["cost_cents"] > 0
    [log] = result["invocation_logs"]  # sent with the result, not on their own
    assert log["httpStatus"] == 200 and log["errorCode"] is None and log["requestId"].startswith("chatcmpl-")
    assert isinstance(log["costCents"], float) and log["costCents"] > 0  # a number, as the schema has it
    assert api.sent["heartbeat"] == ["job_unit"] and not api.sent["fail"] and not api.sent["invocation_logs"]


def test_a_result_in_hand_is_held_and_retried_while_the_api_is_unreachable(standin):
    api = ScriptedApi(standin.base_url)
    api.raises["result"] = [ApiUnavailable("connection refused"), ApiUnavailable("HTTP 503 from result")]
    assert run_one(api, make_job()) == "succeeded"
    assert len(api.sent["result"]) == 3 and len({json.dumps(r, default=str) for r in api.sent["result"]}) == 1
    assert not api.sent["fail"]


def test_a_result_refused_because_the_lease_was_lost_is_dropped_quietly(standin):
    api = ScriptedApi(standin.base_url)
    api.raises["result"] = [ApiError(409, "JOB_NOT_ACTIVE", "the lease lapsed")]
    assert run_one(api, make_job()) == "abandoned"
    assert not api.sent["fail"] and api.sent["invocation_logs"]


def test_a_snapshot_the_api_cannot_serve_is_snapshot_fetch_failed(standin):
    api = ScriptedApi(standin.base_url)
    api.raises["snapshot"] = [ApiUnavailable("HTTP 502")] * 4
    assert run_one(api, make_job()) == "failed:SNAPSHOT_FETCH_FAILED"
    api = ScriptedApi(standin.base_url)
    api.raises["snapshot"] = [ApiError(404, "SNAPSHOT_NOT_FOUND", "gone")]
    assert run_one(api, make_job()) == "failed:SNAPSHOT_FETCH_FAILED"
    assert not api.sent["invocation_logs"]  # no model call was made


@pytest.mark.parametrize(
    "snapshot",
    [
        {"schemaVersion": "v99", "data": {}},
        {"schemaVersion": "v1", "data": "not an object"},
        {"schemaVersion": "v1", "targetType": "knowledge_base", "targetId": "kb_other", "data": {}},
    ],
)
def test_a_snapshot_this_runtime_cannot_read_is_invalid_snapshot(standin, snapshot):
    api = ScriptedApi(standin.base_url)
    api.snapshot_body = snapshot
    assert run_one(api, make_job()) == "failed:INVALID_SNAPSHOT"


def test_a_credential_that_does_not_resolve_is_credential_resolve_failed(standin):
    api = ScriptedApi(standin.base_url)
    api.raises["credential"] = [ApiError(404, "CREDENTIAL_NOT_FOUND", "deleted")]
    assert run_one(api, make_job()) == "failed:CREDENTIAL_RESOLVE_FAILED"
    api = ScriptedApi(standin.base_url)
    api.credential_body = credential("")
    assert run_one(api, make_job()) == "failed:CREDENTIAL_RESOLVE_FAILED"


def test_a_job_type_without_a_prompt_is_unsupported(standin):
    api = ScriptedApi(standin.base_url)
    assert run_one(api, make_job(prompt_version="v999")) == "failed:UNSUPPORTED_JOB_TYPE"
    assert run_one(api, make_job(job_type="poem_generation")) == "failed:UNSUPPORTED_JOB_TYPE"
    assert not api.sent["snapshot"]


def test_a_cancel_seen_on_the_first_heartbeat_stops_before_the_model(standin):
    api = ScriptedApi(standin.base_url)
    api.cancel_requested = True
    assert run_one(api, make_job()) == "failed:JOB_CANCELLED"
    assert api.sent["fail"][0]["error_code"] == "JOB_CANCELLED" and not api.sent["snapshot"]


def test_output_that_misses_the_schema_is_model_response_invalid(standin):
    standin.model.add_faults([{"invalidOutput": True}])
    api = ScriptedApi(standin.base_url)
    assert run_one(api, make_job()) == "failed:MODEL_RESPONSE_INVALID"
    assert "summary" in api.sent["fail"][0]["error_message"]  # names what is missing
    assert api.sent["invocation_logs"][0][0]["errorCode"] == "MODEL_RESPONSE_INVALID"


def test_the_runtime_backs_off_while_the_api_is_down_then_claims(standin):
    api = ScriptedApi(standin.base_url, jobs=[make_job()])
    api.raises["claim"] = [ApiUnavailable("connection refused")] * 3
    runtime = scripted_runtime(api)
    runtime.start()
    try:
        wait_for(lambda: runtime.stats["succeeded"] == 1, timeout=30, what="the job")
    finally:
        runtime.stop(timeout=10)
    assert len(api.sent["claim"]) >= 4


def test_a_claim_whose_answer_did_not_come_is_sent_again_with_its_claim_id(standin):
    api = ScriptedApi(standin.base_url, jobs=[make_job()])
    api.raises["claim"] = [ApiUnavailable("connection reset"), ApiUnavailable("read timeout")]
    runtime = scripted_runtime(api)
    runtime.start()
    try:
        wait_for(lambda: runtime.stats["succeeded"] == 1 and len(api.sent["claim"]) >= 4, timeout=30, what="the job")
    finally:
        runtime.stop(timeout=10)
    first, again, answered, after = api.sent["claim"][:4]
    assert first == again == answered and first  # the same claim until it is answered
    assert after != first  # then each claim has a claimId of its own


def test_a_runtime_stopping_with_a_claim_unanswered_asks_it_once_more_and_runs_what_it_took(standin):
    api = ScriptedApi(standin.base_url, jobs=[make_job()])
    api.raises["claim"] = [ApiUnavailable("connection reset")]
    runtime = scripted_runtime(api)
    runtime.config = dataclasses.replace(runtime.config, grace_seconds=5.0)
    runtime.start()
    wait_for(lambda: api.sent["claim"], what="the first claim")
    runtime.stop(timeout=15)
    assert runtime.stats == {"succeeded": 1}
    first, again = api.sent["claim"]
    assert first == again


@pytest.mark.parametrize(
    ("interrupt", "outcome", "code"),
    [("lose", "abandoned", "JOB_NOT_ACTIVE"), ("request_cancel", "failed:JOB_CANCELLED", "JOB_CANCELLED")],
)
def test_a_model_call_its_attempt_stopped_waiting_for_is_reported_with_its_real_tokens(
    standin, interrupt, outcome, code
):
    """A heartbeat says the lease is lost (or the job cancelled) in the middle of the
    model call: the attempt ends at once, the call runs on and is charged, and its log
    comes once it ends, with its tokens."""
    nonce = f"interrupted-{interrupt}"
    standin.model.add_faults([{"delay": 1.0, "match": nonce}])
    api = ScriptedApi(standin.base_url)
    runtime = scripted_runtime(api)
    run = JobRun(runtime, make_job(params={"case": nonce}))
    runtime._active[run.job.job_id] = run

    def heartbeat_says() -> None:
        wait_for(lambda: standin.model.snapshot_stats()["requests"] == 1, what="the model call")
        getattr(run, interrupt)(*(["the lease lapsed"] if interrupt == "lose" else []))

    threading.Thread(target=heartbeat_says, daemon=True).start()
    run.run()
    assert runtime.stats == {outcome: 1}
    [[log]] = api.sent["invocation_logs"]
    assert (log["errorCode"], log["httpStatus"]) == (code, 200)
    # The stand-in counts an answer once it is on its way (served() after the write): on a
    # busy machine the runtime may have read it and sent its log before that line ran.
    served = wait_for(lambda: standin.model.snapshot_stats().get("tokens"), timeout=10, what="the answer counted")
    assert log["totalTokens"] == served > 0
    assert [f["error_code"] for f in api.sent["fail"]] == ([] if interrupt == "lose" else ["JOB_CANCELLED"])


def test_shutdown_lets_jobs_run_for_the_grace_period_then_reports_them_retryable(standin):
    standin.model.add_faults([{"delay": 30, "times": None}])
    api = ScriptedApi(standin.base_url, jobs=[make_job(job_id="job_a"), make_job(job_id="job_b")])
    runtime = scripted_runtime(api)
    runtime.start()
    wait_for(lambda: standin.model.snapshot_stats()["requests"] == 2, what="both model calls")
    runtime.stop(timeout=15)
    assert not runtime._thread.is_alive() and active_jobs(runtime) == []
    codes = sorted(f["error_code"] for f in api.sent["fail"])
    assert codes == ["RUNTIME_SHUTDOWN", "RUNTIME_SHUTDOWN"]  # retryable, and not the provider's failure
    assert "shut down" in api.sent["fail"][0]["error_message"]
    assert runtime.stats["failed:RUNTIME_SHUTDOWN"] == 2 and len(api.sent["claim"]) >= 1
    assert [log["errorCode"] for [log] in api.sent["invocation_logs"]] == ["RUNTIME_SHUTDOWN"] * 2


def test_a_model_call_that_hangs_past_the_jobs_time_is_model_timeout_reported_before_the_deadline(standin):
    standin.model.add_faults([{"delay": 30}])
    api = ScriptedApi(standin.base_url)
    started = time.monotonic()
    # A 2 s job: its work ends a quarter of it (0.5 s) before its timeoutSeconds.
    assert run_one(api, make_job(timeout_seconds=2), model_timeout_seconds=180) == "failed:MODEL_TIMEOUT"
    assert time.monotonic() - started < 2  # the failure was sent while the attempt was live
    [failure] = api.sent["fail"]
    assert failure["error_code"] == "MODEL_TIMEOUT"
    [[log]] = api.sent["invocation_logs"]
    assert log["errorCode"] == "MODEL_TIMEOUT" and log["latencyMs"] >= 1000


def test_the_deadline_margin_is_the_setting_for_long_jobs_and_a_quarter_of_short_ones(standin):
    runtime = scripted_runtime(ScriptedApi(standin.base_url), deadline_margin_seconds=5)
    long_job, short_job = JobRun(runtime, make_job(timeout_seconds=120)), JobRun(runtime, make_job(timeout_seconds=8))
    now = time.monotonic()
    assert 114 < long_job.deadline - now <= 115
    assert 5.9 < short_job.deadline - now <= 6


@pytest.mark.parametrize(("seen", "outcome"), [("cancel", "failed:JOB_CANCELLED"), ("lease lost", "abandoned")])
def test_a_call_answered_as_the_attempt_ended_is_logged_with_what_ended_it(standin, seen, outcome):
    class AnsweringAsTheAttemptEnds(ModelClient):
        """The real call, and a heartbeat's news arriving the moment its answer does."""

        def complete_json(self, *args: Any, **kwargs: Any) -> ModelCall:
            call = super().complete_json(*args, **kwargs)
            run.cancel_requested = seen == "cancel"
            run.lost = seen == "lease lost"
            return call

    api = ScriptedApi(standin.base_url)
    runtime = scripted_runtime(api)
    runtime.model = AnsweringAsTheAttemptEnds()
    run = JobRun(runtime, make_job())
    run.run()
    assert list(runtime.stats) == [outcome] and not api.sent["result"]
    [[log]] = api.sent["invocation_logs"]
    assert log["errorCode"] == {"cancel": "JOB_CANCELLED", "lease lost": "JOB_NOT_ACTIVE"}[seen]
    assert log["totalTokens"] > 0  # the call was made and paid for: it counts


@pytest.mark.parametrize(
    ("status", "code", "outcome"),
    [
        (409, "JOB_NOT_ACTIVE", "abandoned"),  # consent withdrawn, or the lease lapsed
        (409, "RESULT_ALREADY_EXISTS", "abandoned"),
        (422, "RESULT_SCHEMA_UNSUPPORTED", "failed:MODEL_RESPONSE_INVALID"),
        (400, "VALIDATION_ERROR", "failed:MODEL_RESPONSE_INVALID"),
    ],
)
def test_a_refused_results_call_is_resent_as_an_invocation_log_carrying_the_refusal(standin, status, code, outcome):
    api = ScriptedApi(standin.base_url)
    api.raises["result"] = [ApiError(status, code, "refused")]
    assert run_one(api, make_job()) == outcome
    [sent] = api.sent["result"]
    [[log]] = api.sent["invocation_logs"]
    assert log["errorCode"] == code  # so the server counts its tokens
    assert log["requestId"] == sent["invocation_logs"][0]["requestId"] and log["totalTokens"] > 0
