"""The platform key's circuit breaker: what counts against it, how it moves, what it
admits. One row (id 1); every move is a compare-and-set on its state, recorded as an
event with who and why."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from config.errors import DomainError, ErrorCode
from config.sql import fetch
from quotas import queries
from quotas.models import CircuitBreakerEvent, CircuitState, PlatformCircuitBreaker
from quotas.selectors import breaker_get, breaker_state_forget

logger = logging.getLogger(__name__)

# The provider failing is what opens the breaker: no answer in time, a throttle, a
# broken connection, its passing trouble (NETWORK_ERROR and TEMPORARY_PROVIDER_ERROR
# are the first runtime protocol's names for it). An answer that misses its schema, a
# bad snapshot, a cancellation, a runtime's shutdown or a lapsed lease says nothing
# about the provider's health.
MODEL_FAILURE_CODES = frozenset(
    {
        "MODEL_TIMEOUT",
        "MODEL_RATE_LIMIT",
        "MODEL_NETWORK_ERROR",
        "NETWORK_ERROR",
        "TEMPORARY_PROVIDER_ERROR",
    }
)

# A breaker moved by others between the read and the compare-and-set is read again,
# a few times at most.
TRANSITION_ATTEMPTS = 5


def breaker_transition(*, to: str, actor: str, reason: str, only_from: tuple[str, ...] | None = None) -> bool:
    """Move the breaker to ``to`` with a compare-and-set on its current state, and
    record who and why. False when it was already there or not in ``only_from``."""
    for _ in range(TRANSITION_ATTEMPTS):
        current = breaker_get()
        if current.state == to or (only_from is not None and current.state not in only_from):
            return False
        with transaction.atomic():
            changed = PlatformCircuitBreaker.objects.filter(id=1, state=current.state).update(
                state=to,
                consecutive_failures=0 if to == CircuitState.CLOSED else current.consecutive_failures,
                changed_at=timezone.now(),
                changed_by=actor[:150],
                reason=reason,
            )
            if changed:
                breaker_state_forget()
                CircuitBreakerEvent.objects.create(
                    from_state=current.state,
                    to_state=to,
                    actor=actor[:150],
                    reason=reason,
                    consecutive_failures=current.consecutive_failures,
                )
                logger.warning("circuit breaker %s -> %s by %s: %s", current.state, to, actor, reason)
                return True
    return False


def breaker_record_failure() -> None:
    """A platform-key model failure: count it; the threshold opens the breaker, and
    any failure while half-open opens it again. One statement once the breaker's row exists."""
    rows = fetch(queries.COUNT_BREAKER_FAILURE)
    if not rows:  # the first failure ever: the row (closed) is made, then counted
        breaker_get()
        rows = fetch(queries.COUNT_BREAKER_FAILURE)
    failures, state = int(rows[0][0]), rows[0][1]  # type: ignore[arg-type]
    if state == CircuitState.HALF_OPEN:
        breaker_transition(
            to=CircuitState.OPEN,
            actor="system",
            reason="A platform-key model call failed while half-open",
            only_from=(CircuitState.HALF_OPEN,),
        )
    elif state == CircuitState.CLOSED and failures >= settings.PLATFORM_CIRCUIT_FAILURE_THRESHOLD:
        breaker_transition(
            to=CircuitState.OPEN,
            actor="system",
            reason=f"{failures} consecutive platform-key model failures",
            only_from=(CircuitState.CLOSED,),
        )


def breaker_close_if_half_open(*, state: str | None) -> None:
    """``state``: the breaker's, as a success found it when it started its failures
    again (``counting``); a half-open one closes."""
    if state == CircuitState.HALF_OPEN:
        breaker_transition(
            to=CircuitState.CLOSED,
            actor="system",
            reason="A platform-key job succeeded while half-open",
            only_from=(CircuitState.HALF_OPEN,),
        )


def breaker_open_over_budget(*, reason: str) -> None:
    """``reason``: why today's platform budget is used up ("" while it is not): the breaker opens."""
    if reason:
        breaker_transition(
            to=CircuitState.OPEN, actor="system", reason=reason, only_from=(CircuitState.CLOSED, CircuitState.HALF_OPEN)
        )


def breaker_check_open(state: str | None) -> str:
    """Refuse a new platform-key job while the breaker is open; its state otherwise (a
    breaker never written yet is closed)."""
    if state == CircuitState.OPEN:
        raise DomainError(ErrorCode.PLATFORM_CIRCUIT_OPEN, "The platform model key is paused by its circuit breaker")
    return str(state or CircuitState.CLOSED)


def breaker_admit(*, locked: bool = False) -> str:
    """The breaker's say on a new platform-key job: ``PLATFORM_CIRCUIT_OPEN`` while it
    is open, else its state; while half-open the caller counts the active platform-key
    jobs for ``half_open_admit``. ``locked``: inside the creating transaction, with the
    breaker row locked, so half-open admissions are decided one at a time."""
    breaker = PlatformCircuitBreaker.objects.select_for_update().get(id=1) if locked else breaker_get()
    return breaker_check_open(breaker.state)


def half_open_admit(*, active_platform_jobs: int) -> None:
    """While half-open, at most ``PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS`` platform-key jobs are active."""
    if active_platform_jobs >= settings.PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS:
        raise DomainError(
            ErrorCode.PLATFORM_CIRCUIT_HALF_OPEN,
            f"The circuit breaker is half-open: {active_platform_jobs} of "
            f"{settings.PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS} trial platform-key jobs are active",
        )


def breaker_lock_half_open() -> bool:
    """Inside a transaction: lock the breaker's row if it is half-open, so trial
    platform-key jobs are admitted one decision at a time. False when it is not half-open."""
    locked = PlatformCircuitBreaker.objects.select_for_update().filter(id=1, state=CircuitState.HALF_OPEN)
    return bool(list(locked.values_list("id", flat=True)))
