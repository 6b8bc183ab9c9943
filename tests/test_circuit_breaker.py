"""The platform key's circuit breaker (seed 002 §2.2) and budget, end to end
through the runtime and user APIs, with the operator's controls in admin."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import CircuitBreakerEvent, CircuitState, PlatformDailyUsage, UserAiUsage
from tests.conftest import RuntimeClient, error_code
from tests.factories import VALID_OUTPUTS
from tests.user_api_support import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def _run_and_fail(learner: Learner, runtime: RuntimeClient, code: str = "MODEL_TIMEOUT") -> None:
    job_id = learner.job().json()["jobId"]
    runtime.lock(job_id)
    assert runtime.fail(job_id, 1, code).status_code == 200


def _run_and_succeed(learner: Learner, runtime: RuntimeClient, **extra) -> str:
    job_id = learner.job(**extra).json()["jobId"]
    runtime.lock(job_id)
    body = {"usage": {"promptTokens": 300, "completionTokens": 200}, "costCents": "1.5"}
    assert runtime.result(job_id, 1, VALID_OUTPUTS["learning_state_analysis"], **body).status_code == 200
    return job_id


def test_ten_platform_model_failures_in_a_row_open_the_breaker_for_platform_jobs_only(settings):
    learner, runtime = Learner(), RuntimeClient("runtime-1")
    settings.AI_DEFAULT_MAX_DAILY_JOBS = 100
    for _ in range(9):
        _run_and_fail(learner, runtime)
    _run_and_fail(learner, runtime, "INVALID_SNAPSHOT")  # not a model failure: not counted
    assert quota_selectors.breaker_get().state == CircuitState.CLOSED
    _run_and_fail(learner, runtime, "MODEL_RATE_LIMIT")
    breaker = quota_selectors.breaker_get()
    assert breaker.state == CircuitState.OPEN and breaker.consecutive_failures == 10
    refused = learner.job()
    assert refused.status_code == 503 and error_code(refused) == "PLATFORM_CIRCUIT_OPEN"
    assert refused.json()["error"]["retryable"] is True
    credential = learner.credential()
    assert learner.job(apiKeyMode="user_deepseek_key", credentialId=credential).status_code == 201
    event = CircuitBreakerEvent.objects.get()
    assert (event.from_state, event.to_state, event.actor) == ("closed", "open", "system")
    assert "10 consecutive" in event.reason


def test_a_success_resets_the_count_of_consecutive_failures(settings):
    learner, runtime = Learner(), RuntimeClient("runtime-1")
    settings.AI_DEFAULT_MAX_DAILY_JOBS = 100
    for _ in range(9):
        _run_and_fail(learner, runtime)
    _run_and_succeed(learner, runtime)
    assert quota_selectors.breaker_get().consecutive_failures == 0
    for _ in range(9):
        _run_and_fail(learner, runtime)
    assert quota_selectors.breaker_get().state == CircuitState.CLOSED


def test_user_key_failures_do_not_count():
    learner, runtime = Learner(), RuntimeClient("runtime-1")
    credential = learner.credential()
    for _ in range(12):
        job_id = learner.job(apiKeyMode="user_deepseek_key", credentialId=credential).json()["jobId"]
        runtime.lock(job_id)
        runtime.fail(job_id, 1, "MODEL_TIMEOUT")
    assert quota_selectors.breaker_get().state == CircuitState.CLOSED


def test_half_open_admits_two_platform_jobs_and_one_success_closes_it():
    learner, runtime = Learner(), RuntimeClient("runtime-1")
    quotas.breaker_transition(to=CircuitState.OPEN, actor="system", reason="test")
    quotas.breaker_transition(to=CircuitState.HALF_OPEN, actor="operator", reason="try again")
    first, second = learner.job().json()["jobId"], learner.job().json()["jobId"]
    third = learner.job()
    assert third.status_code == 503 and error_code(third) == "PLATFORM_CIRCUIT_HALF_OPEN"
    runtime.lock(first)
    runtime.result(first, 1, VALID_OUTPUTS["learning_state_analysis"])
    assert quota_selectors.breaker_get().state == CircuitState.CLOSED
    assert learner.job().status_code == 201
    assert [e.to_state for e in CircuitBreakerEvent.objects.order_by("id")] == ["open", "half_open", "closed"]
    assert learner.get(f"/ai/jobs/{second}").json()["status"] == "pending"


def test_a_failure_while_half_open_opens_it_again():
    learner, runtime = Learner(), RuntimeClient("runtime-1")
    quotas.breaker_transition(to=CircuitState.OPEN, actor="system", reason="test")
    quotas.breaker_transition(to=CircuitState.HALF_OPEN, actor="operator", reason="try again")
    _run_and_fail(learner, runtime)
    assert quota_selectors.breaker_get().state == CircuitState.OPEN


def test_a_result_counts_tokens_for_the_user_and_the_platform_and_going_over_budget_opens_it(settings):
    learner, runtime = Learner(), RuntimeClient("runtime-1")
    settings.PLATFORM_DAILY_TOKEN_BUDGET = 900
    _run_and_succeed(learner, runtime)
    usage = UserAiUsage.objects.get(user=learner.user, api_key_mode="platform_key")
    assert (usage.job_count, usage.tokens_used, usage.cost_cents) == (1, 500, Decimal("1.5"))
    assert quota_selectors.platform_usage_today().tokens_used == 500
    assert quota_selectors.breaker_get().state == CircuitState.CLOSED
    _run_and_succeed(learner, runtime)
    assert quota_selectors.platform_usage_today().tokens_used == 1000
    assert quota_selectors.breaker_get().state == CircuitState.OPEN
    assert "token budget" in CircuitBreakerEvent.objects.get().reason
    # While today's budget is used up its own code answers (contract §4 step 8), not the breaker's.
    assert error_code(learner.job()) == "PLATFORM_TOKEN_BUDGET_EXCEEDED"


def test_user_key_results_are_not_counted_against_the_platform():
    learner, runtime = Learner(), RuntimeClient("runtime-1")
    credential = learner.credential()
    _run_and_succeed(learner, runtime, apiKeyMode="user_deepseek_key", credentialId=credential)
    assert not PlatformDailyUsage.objects.exists()
    assert UserAiUsage.objects.get(user=learner.user, api_key_mode="user_deepseek_key").tokens_used == 500


def test_an_operator_moves_the_breaker_in_admin_and_the_change_is_recorded():
    operator = Client()
    operator.force_login(get_user_model().objects.create_superuser("ops", "ops@example.com", "pw"))
    page = operator.get("/admin/quotas/platformcircuitbreaker/")
    assert page.status_code == 200 and b"State:" in page.content
    for to_state in ("open", "half_open", "closed"):
        response = operator.post(
            "/admin/quotas/platformcircuitbreaker/", {"to_state": to_state, "reason": f"drill {to_state}"}, follow=True
        )
        assert response.status_code == 200
        assert quota_selectors.breaker_get().state == to_state
    events = list(CircuitBreakerEvent.objects.order_by("id").values_list("to_state", "actor", "reason"))
    assert events == [
        ("open", "ops", "drill open"),
        ("half_open", "ops", "drill half_open"),
        ("closed", "ops", "drill closed"),
    ]
    for url in ("/admin/quotas/useraisettings/", "/admin/quotas/useraiusage/", "/admin/quotas/platformdailyusage/",
                "/admin/quotas/circuitbreakerevent/"):  # fmt: skip
        assert operator.get(url).status_code == 200, url
