"""The platform key's circuit breaker: what counts against it (platform-key model
failures; not a bad snapshot, not a user's own key), how it moves (the threshold opens
it, an operator half-opens it, one success closes it, a failure while half-open opens
it again), what it admits, and the operator's controls in admin. Through the runtime
and user APIs, and through its services. (What the claim hands out while it is open or
half-open: ``test_breaker_protects_provider.py``.)"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import Client

from config.errors import DomainError, ErrorCode
from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import CircuitBreakerEvent, CircuitState, PlatformCircuitBreaker
from quotas.services import counting
from tests.support.api import RuntimeClient, error_code
from tests.support.breaker import breaker_half_open, breaker_open, run_and_fail, run_and_succeed
from tests.support.concurrency import run_together
from tests.support.factories import VALID_OUTPUTS, JobFactory, UserFactory
from tests.support.user_api import Learner

pytestmark = pytest.mark.django_db


def _state() -> tuple[str, int]:
    breaker = quota_selectors.breaker_get()
    return breaker.state, breaker.consecutive_failures


def _events() -> list[tuple[str, str, str]]:
    return list(CircuitBreakerEvent.objects.order_by("id").values_list("from_state", "to_state", "actor"))


def _platform_key_success() -> None:
    """A platform-key result counted as one lands: the breaker's success."""
    user = UserFactory()
    quotas.usage_record_result(
        user_id=user.pk, quota_date=None, api_key_mode="platform_key", total_tokens=1, cost_cents=Decimal(0)
    )


# --- through the runtime and user APIs --------------------------------------------------------------


@pytest.mark.embedded
def test_ten_platform_model_failures_in_a_row_open_the_breaker_for_platform_jobs_only(settings):
    learner, runtime = Learner(), RuntimeClient("runtime-1")
    settings.AI_DEFAULT_MAX_DAILY_JOBS = 100
    for _ in range(9):
        run_and_fail(learner, runtime)
    run_and_fail(learner, runtime, "INVALID_SNAPSHOT")  # not a model failure: not counted
    assert quota_selectors.breaker_get().state == CircuitState.CLOSED
    run_and_fail(learner, runtime, "MODEL_RATE_LIMIT")
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


def test_the_other_provider_failure_codes_count_towards_the_breaker(runtime, settings):
    # MODEL_TIMEOUT and MODEL_RATE_LIMIT above; the model's network, and the first
    # runtime protocol's two codes.
    settings.PLATFORM_CIRCUIT_FAILURE_THRESHOLD = 3
    for code in ("MODEL_NETWORK_ERROR", "NETWORK_ERROR", "TEMPORARY_PROVIDER_ERROR"):
        job = JobFactory()
        runtime.fail(job.id, runtime.lock(job.id).json()["attemptNo"], code)
    assert quota_selectors.breaker_get().state == CircuitState.OPEN


@pytest.mark.parametrize(
    "code", ["MODEL_RESPONSE_INVALID", "MODEL_JSON_PARSE_FAILED", "INVALID_SCHEMA", "RUNTIME_SHUTDOWN", "JOB_TIMEOUT"]
)
def test_failures_that_are_not_the_providers_never_count_towards_the_breaker(runtime, settings, code):
    # An answer that misses its schema, a runtime that stopped, the job's own time: none
    # says the provider is failing.
    settings.PLATFORM_CIRCUIT_FAILURE_THRESHOLD = 2
    for _ in range(3):
        job = JobFactory()
        assert runtime.fail(job.id, runtime.lock(job.id).json()["attemptNo"], code).status_code == 200
    assert _state() == (CircuitState.CLOSED, 0)


@pytest.mark.embedded
def test_a_success_resets_the_count_of_consecutive_failures(settings):
    learner, runtime = Learner(), RuntimeClient("runtime-1")
    settings.AI_DEFAULT_MAX_DAILY_JOBS = 100
    for _ in range(9):
        run_and_fail(learner, runtime)
    run_and_succeed(learner, runtime)
    assert quota_selectors.breaker_get().consecutive_failures == 0
    for _ in range(9):
        run_and_fail(learner, runtime)
    assert quota_selectors.breaker_get().state == CircuitState.CLOSED


@pytest.mark.embedded
def test_user_key_failures_do_not_count():
    learner, runtime = Learner(), RuntimeClient("runtime-1")
    credential = learner.credential()
    for _ in range(12):
        job_id = learner.job(apiKeyMode="user_deepseek_key", credentialId=credential).json()["jobId"]
        runtime.lock(job_id)
        runtime.fail(job_id, 1, "MODEL_TIMEOUT")
    assert quota_selectors.breaker_get().state == CircuitState.CLOSED


@pytest.mark.embedded
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


@pytest.mark.embedded
def test_a_failure_while_half_open_opens_it_again():
    learner, runtime = Learner(), RuntimeClient("runtime-1")
    quotas.breaker_transition(to=CircuitState.OPEN, actor="system", reason="test")
    quotas.breaker_transition(to=CircuitState.HALF_OPEN, actor="operator", reason="try again")
    run_and_fail(learner, runtime)
    assert quota_selectors.breaker_get().state == CircuitState.OPEN


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_half_open_breaker_admits_two_platform_jobs_even_under_a_rush():
    quotas.breaker_transition(to=CircuitState.OPEN, actor="test", reason="test")
    quotas.breaker_transition(to=CircuitState.HALF_OPEN, actor="operator", reason="trial")
    learners = [Learner() for _ in range(12)]
    outcomes = Counter(run_together(12, lambda i: _code(learners[i].twin().job())))
    assert outcomes == {"created": 2, "PLATFORM_CIRCUIT_HALF_OPEN": 10}


def _code(response) -> str:
    return "created" if response.status_code == 201 else response.json()["error"]["code"]


@pytest.mark.embedded
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


# --- its services ---------------------------------------------------------------------------------------


@pytest.mark.embedded
def test_a_move_is_a_compare_and_set_on_the_state_recorded_with_who_and_why():
    assert quotas.breaker_transition(to=CircuitState.OPEN, actor="ops", reason="drill") is True
    assert quotas.breaker_transition(to=CircuitState.OPEN, actor="ops", reason="again") is False  # already there
    only_half_open = (CircuitState.HALF_OPEN,)
    assert (
        quotas.breaker_transition(to=CircuitState.CLOSED, actor="system", reason="x", only_from=only_half_open) is False
    )
    breaker = quota_selectors.breaker_get()
    assert (breaker.state, breaker.changed_by, breaker.reason) == ("open", "ops", "drill")
    assert _events() == [("closed", "open", "ops")]


@pytest.mark.embedded
def test_the_threshold_opens_it_and_only_closing_forgets_the_failures(settings):
    settings.PLATFORM_CIRCUIT_FAILURE_THRESHOLD = 3
    assert not PlatformCircuitBreaker.objects.exists()
    quotas.breaker_record_failure()  # the first failure ever makes the row, closed, and counts
    assert _state() == ("closed", 1)
    quotas.breaker_record_failure()
    quotas.breaker_record_failure()
    assert _state() == ("open", 3)
    assert CircuitBreakerEvent.objects.get().reason == "3 consecutive platform-key model failures"
    quotas.breaker_record_failure()  # while open: counted, nothing moves
    assert _state() == ("open", 4) and len(_events()) == 1
    quotas.breaker_transition(to=CircuitState.HALF_OPEN, actor="operator", reason="try again")
    assert _state() == ("half_open", 4)
    assert CircuitBreakerEvent.objects.order_by("id").last().consecutive_failures == 4
    quotas.breaker_transition(to=CircuitState.CLOSED, actor="operator", reason="fixed")
    assert _state() == ("closed", 0)


@pytest.mark.embedded
def test_a_failure_while_half_open_opens_it_and_a_success_closes_it():
    breaker_half_open()
    quotas.breaker_record_failure()
    assert _state()[0] == "open"
    assert (
        CircuitBreakerEvent.objects.order_by("id").last().reason == "A platform-key model call failed while half-open"
    )
    quotas.breaker_transition(to=CircuitState.HALF_OPEN, actor="operator", reason="again")
    _platform_key_success()
    assert _state() == ("closed", 0)
    assert _events()[-1] == ("half_open", "closed", "system")


@pytest.mark.embedded
def test_a_success_resets_the_failures_of_a_closed_breaker_without_moving_it():
    quotas.breaker_record_failure()
    quotas.breaker_record_failure()
    _platform_key_success()
    assert _state() == ("closed", 0) and _events() == []


def test_a_success_on_a_closed_breaker_without_failures_leaves_its_row_unwritten(monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("reads PostgreSQL's row version")
    quota_selectors.breaker_get()

    def version() -> str:  # a new one for every UPDATE, even of equal values
        with connection.cursor() as cursor:
            cursor.execute("SELECT xmin::text FROM quota_platform_circuit_breaker WHERE id = 1")
            return cursor.fetchone()[0]

    before = version()
    _platform_key_success()
    monkeypatch.setattr(counting, "_in_one_statement", counting._with_orm)  # SQLite's way, on PostgreSQL
    _platform_key_success()
    assert version() == before


@pytest.mark.embedded
def test_open_refuses_new_platform_jobs_and_half_open_admits_the_trial_number(settings):
    settings.PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS = 2
    assert quotas.breaker_admit() == "closed"
    breaker_open()
    with pytest.raises(DomainError) as refused:
        quotas.breaker_admit()
    assert refused.value.code == ErrorCode.PLATFORM_CIRCUIT_OPEN
    quotas.breaker_transition(to=CircuitState.HALF_OPEN, actor="operator", reason="try again")
    with transaction.atomic():
        assert quotas.breaker_admit(locked=True) == "half_open"
    quotas.half_open_admit(active_platform_jobs=1)
    with pytest.raises(DomainError) as full:
        quotas.half_open_admit(active_platform_jobs=2)
    assert full.value.code == ErrorCode.PLATFORM_CIRCUIT_HALF_OPEN and "2 of 2" in full.value.message


@pytest.mark.embedded
def test_the_row_is_locked_for_trial_decisions_only_while_half_open():
    with transaction.atomic():
        assert quotas.breaker_lock_half_open() is False
    breaker_open()
    with transaction.atomic():
        assert quotas.breaker_lock_half_open() is False
    quotas.breaker_transition(to=CircuitState.HALF_OPEN, actor="operator", reason="try again")
    with transaction.atomic():
        assert quotas.breaker_lock_half_open() is True


@pytest.mark.embedded
def test_the_state_hint_is_read_once_a_while_and_afresh_after_a_move_in_this_process(monkeypatch):
    monkeypatch.setattr(quota_selectors, "BREAKER_STATE_MAX_AGE_SECONDS", 3600.0)
    assert quota_selectors.breaker_state_hint() == "closed"  # no row yet: closed
    quota_selectors.breaker_get()
    PlatformCircuitBreaker.objects.filter(id=1).update(state=CircuitState.HALF_OPEN)  # as another process would
    assert quota_selectors.breaker_state_hint() == "closed"  # a hint, read at most once in its age
    monkeypatch.setattr(quota_selectors, "BREAKER_STATE_MAX_AGE_SECONDS", 0.0)
    assert quota_selectors.breaker_state_hint() == "half_open"
    monkeypatch.setattr(quota_selectors, "BREAKER_STATE_MAX_AGE_SECONDS", 3600.0)
    quotas.breaker_transition(to=CircuitState.OPEN, actor="operator", reason="stop")
    assert quota_selectors.breaker_state_hint() == "open"  # this process moved it: read again
