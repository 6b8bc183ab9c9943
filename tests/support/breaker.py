"""The platform key's circuit breaker moved for a test, and jobs run through the
runtime API to count for it."""

from __future__ import annotations

from quotas import services as quotas
from quotas.models import CircuitState
from tests.support.api import RuntimeClient
from tests.support.factories import VALID_OUTPUTS
from tests.support.user_api import Learner


def breaker_open(reason: str = "the provider answers 503") -> None:
    quotas.breaker_transition(to=CircuitState.OPEN, actor="system", reason=reason)


def breaker_half_open() -> None:
    """Opened, then half-opened by an operator: trial platform-key jobs only."""
    breaker_open()
    quotas.breaker_transition(to=CircuitState.HALF_OPEN, actor="operator", reason="try again")


def run_and_fail(learner: Learner, runtime: RuntimeClient, code: str = "MODEL_TIMEOUT") -> None:
    """A new job of the learner's, locked and failed by the runtime with ``code``."""
    job_id = learner.job().json()["jobId"]
    runtime.lock(job_id)
    assert runtime.fail(job_id, 1, code).status_code == 200


def run_and_succeed(learner: Learner, runtime: RuntimeClient, **extra) -> str:
    """A new job of the learner's (``extra``: its body), locked and finished with a
    result of 500 tokens and 1.5 cents."""
    job_id = learner.job(**extra).json()["jobId"]
    runtime.lock(job_id)
    body = {"usage": {"promptTokens": 300, "completionTokens": 200}, "costCents": "1.5"}
    assert runtime.result(job_id, 1, VALID_OUTPUTS["learning_state_analysis"], **body).status_code == 200
    return job_id
