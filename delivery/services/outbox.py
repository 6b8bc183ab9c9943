"""The one outbox (DESIGN rule 12): every delivery, push or webhook, goes through here.

The engine's whole API, for a new kind of delivery (the webhooks build on it so):

1. Write the rows **in the transaction that made the event** with
   ``deliveries_write(kind=..., event_id=..., owner_id=..., receivers=[(receiver_id,
   channel), ...], payload={...}, expires_at=None)``. One row per receiver; at most one
   per ``(kind, event_id, receiver_id)``, so writing an event twice sends it once. The
   send tasks are enqueued after commit (``transaction.on_commit``): a rolled-back
   event sends nothing. (Pushes write theirs with one ``INSERT ... SELECT`` over the
   user's devices, ``delivery.services.push``, and enqueue them the same way,
   ``deliveries_enqueue``.)
2. Register a ``Sender`` for the kind, once, at import (an ``AppConfig.ready``
   imports the module): ``sender_register(MySender())``. A sender has

   - ``kind``: the rows' ``kind``;
   - ``schedule``: when to try again, a ``Backoff`` (exponential with jitter, honouring
     ``Retry-After``, at most so many tries) or a ``FixedSchedule`` (tried once, then
     once after each interval; ``schedule_parse("5s,5m,30m")``), both in
     ``delivery.services.schedules`` and importable from here;
   - ``send(delivery) -> Answer``: one try; it never raises for what the receiver
     answered or the network did, it says so in the ``Answer``
     (``Outcome.DELIVERED``, ``RETRY`` with ``retry_after`` if the receiver asked,
     ``FAILED`` for good, ``DROPPED`` when there is nothing to send to any more);
     ``note`` names a finer outcome for metrics (``device_disabled``);
   - ``count(delivery, outcome)``: its metric (``outcome``: delivered, retried,
     failed, dropped, or the answer's ``note``); the default counts nothing.
3. Nothing else: ``delivery_send`` (the Celery task ``delivery.tasks.send``) claims
   a delivery with a conditional ``UPDATE`` (pending, due or never tried, to sending,
   ``attempts + 1``), calls the sender, records the try (``DeliveryAttempt``) and
   finishes it with a conditional ``UPDATE`` guarded by that claim: a task that runs
   twice, or two tasks at once, send once. A ``RETRY`` answer goes back to pending
   with ``next_attempt_at`` from the schedule (past its last try, or past
   ``expires_at``, it is failed). ``deliveries_dispatch`` (beat, every
   ``DELIVERY_DISPATCH_INTERVAL_SECONDS``) enqueues the due ones and takes back claims
   whose task died (``DELIVERY_CLAIM_SECONDS``). ``deliveries_drop_of_owner`` /
   ``deliveries_drop_of_receiver`` drop what is not sent yet; ``delivery_resend``
   sends one again (a replay) with its own event id.

A sender reads what it needs from the row: ``payload`` (what the caller handed
over), ``receiver_id`` and ``owner_id`` (plain ids it resolves itself, e.g. a device
or a webhook endpoint), ``event_id`` (the same on every try: a webhook's
``webhook-id``), ``attempts`` (this try's number, from 1), ``created_at``.
Attempts are rows of ``DeliveryAttempt`` (number, time, status code, outcome,
error). A try that was claimed again after its lease ran out finishes nothing (its
``FINISH`` changes no row), so a receiver may, rarely, see one event twice: the
event id lets it tell.

Statuses: pending, sending, then delivered, failed or dropped (``DeliveryStatus``).
A new row is due ``DELIVERY_DISPATCH_INTERVAL_SECONDS`` after it is written: its
after-commit task normally sends it at once, and the dispatcher takes it only if that
message was lost.
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from config.ids import new_id
from config.observability.context import bound
from config.sql import execute, fetch, insert_rows
from delivery import queries
from delivery.models import Delivery, DeliveryAttempt, DeliveryStatus
from delivery.services.schedules import Backoff, FixedSchedule, retry_after_seconds, schedule_parse

# The engine's API, the schedules' included (defined in ``delivery.services.schedules``).
__all__ = [
    "Answer", "Backoff", "FixedSchedule", "Outcome", "Sender", "deliveries_dispatch", "deliveries_drop_of_owner",
    "deliveries_drop_of_receiver", "deliveries_enqueue", "deliveries_write", "delivery_resend", "delivery_send",
    "dispatch", "first_due", "retry_after_seconds", "schedule_parse", "send", "sender_for", "sender_register",
]  # fmt: skip

logger = logging.getLogger(__name__)

SEND_TASK = "delivery.tasks.send"
_ERROR_LENGTH = 500  # what a row keeps of an error text


class Outcome(enum.StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"
    FAILED = "failed"
    DROPPED = "dropped"


@dataclass(frozen=True)
class Answer:
    """What one try came to, as the sender saw it."""

    outcome: Outcome
    status_code: int | None = None
    error: str = ""
    retry_after: float | None = None  # seconds the receiver asked us to wait
    note: str = ""  # a finer outcome for the sender's metric (``device_disabled``)


# --- senders ---------------------------------------------------------------------------------------


class Sender:
    """What a kind of delivery plugs into the engine with (the module docstring)."""

    kind: str = ""
    schedule: Backoff | FixedSchedule = FixedSchedule(())

    def send(self, delivery: Delivery) -> Answer:
        raise NotImplementedError

    def count(self, delivery: Delivery, outcome: str) -> None:
        """Its metric for one finished try; counts nothing by default."""


_SENDERS: dict[str, Sender] = {}


def sender_register(sender: Sender) -> None:
    _SENDERS[sender.kind] = sender


def sender_for(kind: str) -> Sender | None:
    return _SENDERS.get(kind)


# --- written with the event ------------------------------------------------------------------------


def first_due(now: dt.datetime) -> dt.datetime:
    """When the dispatcher takes a new row whose after-commit message was lost."""
    return now + dt.timedelta(seconds=settings.DELIVERY_DISPATCH_INTERVAL_SECONDS)


def deliveries_write(
    *,
    kind: str,
    event_id: str,
    owner_id: str,
    receivers: Sequence[tuple[str, str]],
    payload: dict[str, Any],
    expires_at: dt.datetime | None = None,
) -> list[str]:
    """One delivery of ``payload`` per ``(receiver_id, channel)``, written in the
    caller's transaction (one statement), sent after it commits. The ids of the rows
    written; an event already written for a receiver is not written again."""
    if not receivers:
        return []
    now = timezone.now()
    rows = [
        {
            "id": new_id("dlv"),
            "kind": kind,
            "event_id": event_id,
            "receiver_id": receiver_id,
            "owner_id": owner_id,
            "channel": channel,
            "payload": payload,
            "status": DeliveryStatus.PENDING,
            "attempts": 0,
            "next_attempt_at": first_due(now),
            "expires_at": expires_at,
            "last_error": "",
            "created_at": now,
        }
        for receiver_id, channel in receivers
    ]
    insert_rows(Delivery, rows, suffix="ON CONFLICT DO NOTHING")
    ids = [row["id"] for row in rows]
    deliveries_enqueue(ids)
    return ids


def deliveries_enqueue(ids: Iterable[str]) -> None:
    """Send these deliveries once the current transaction commits (at once outside
    one). A message that cannot be enqueued is left to the dispatcher: the event's
    own request never fails for it."""
    ids = list(ids)
    if ids:
        transaction.on_commit(lambda: _enqueue(ids), robust=True)


def _enqueue(ids: Sequence[str], *, expires: float | None = None) -> None:
    for delivery_id in ids:
        try:
            send.apply_async((delivery_id,), expires=expires or settings.DELIVERY_CLAIM_SECONDS)
        except Exception as error:
            logger.warning("delivery %s: not enqueued (%s); the dispatcher sends it", delivery_id, error)


# --- one try ----------------------------------------------------------------------------------------


def delivery_send(*, delivery_id: str) -> str | None:
    """Claim the delivery, try it once, finish it. The status it ended the try in, or
    ``None`` when there was nothing to claim (sent, being sent, not due)."""
    now = timezone.now()
    claimed = fetch(
        queries.CLAIM,
        {
            "id": delivery_id,
            "now": now,
            "claimed_until": now + dt.timedelta(seconds=settings.DELIVERY_CLAIM_SECONDS),
        },
    )
    if not claimed:
        return None
    attempts = int(claimed[0][0])
    delivery = Delivery.objects.get(id=delivery_id)
    sender = sender_for(delivery.kind)
    started = time.monotonic()
    if sender is None:
        answer = Answer(Outcome.FAILED, error=f"no sender for deliveries of kind {delivery.kind!r}")
    elif delivery.expires_at is not None and now >= delivery.expires_at:
        answer = Answer(Outcome.FAILED, error="expired before it could be sent")
    else:
        try:
            answer = sender.send(delivery)
        except Exception as error:  # a sender's own bug: retried on its schedule, and logged
            logger.exception("delivery %s: its sender raised", delivery_id)
            answer = Answer(Outcome.RETRY, error=f"{type(error).__name__}: {error}")
    return _finish(delivery, sender, attempts, answer, started_at=now, seconds=time.monotonic() - started)


def _finish(
    delivery: Delivery, sender: Sender | None, attempts: int, answer: Answer, *, started_at: dt.datetime,
    seconds: float,
) -> str | None:  # fmt: skip
    now = timezone.now()
    status, next_attempt_at, counted = _status_of(delivery, sender, attempts, answer, now)
    with transaction.atomic():
        changed = execute(
            queries.FINISH,
            {
                "id": delivery.id,
                "attempts": attempts,
                "status": status,
                "next_attempt_at": next_attempt_at,
                "status_code": answer.status_code,
                "error": answer.error[:_ERROR_LENGTH],
                "finished_at": None if status == DeliveryStatus.PENDING else now,
            },
        )
        if changed != 1:  # the claim was taken back (its lease ran out): the later claim finishes
            return None
        DeliveryAttempt.objects.create(
            delivery_id=delivery.id,
            number=attempts,
            started_at=started_at,
            duration_ms=int(seconds * 1000),
            status_code=answer.status_code,
            outcome=counted,
            error=answer.error[:_ERROR_LENGTH],
        )
    if sender is not None:
        sender.count(delivery, counted)
    with bound(deliveryId=delivery.id):
        log = logger.warning if status == DeliveryStatus.FAILED else logger.info
        log("delivery %s (%s) try %s: %s%s", delivery.id, delivery.kind, attempts, counted,
            f" ({answer.error[:200]})" if answer.error else "")  # fmt: skip
    return status


def _status_of(
    delivery: Delivery, sender: Sender | None, attempts: int, answer: Answer, now: dt.datetime
) -> tuple[str, dt.datetime | None, str]:
    """The row's status after this try, when it is due again, and the metric's outcome."""
    if answer.outcome == Outcome.DELIVERED:
        return DeliveryStatus.DELIVERED, None, answer.note or "delivered"
    if answer.outcome == Outcome.DROPPED:
        return DeliveryStatus.DROPPED, None, answer.note or "dropped"
    if answer.outcome == Outcome.RETRY and sender is not None:
        delay = sender.schedule.delay(attempts, answer.retry_after)
        if delay is not None:
            due = now + dt.timedelta(seconds=delay)
            if delivery.expires_at is None or due < delivery.expires_at:
                return DeliveryStatus.PENDING, due, answer.note or "retried"
    return DeliveryStatus.FAILED, None, answer.note or "failed"


# --- what is not to be sent any more -------------------------------------------------------------------


def deliveries_drop_of_owner(*, kind: str, owner_id: str, reason: str) -> list[Delivery]:
    """Drop the owner's deliveries of this kind not yet sent (one being sent this
    moment finishes). The dropped rows' channels, for the caller's metric."""
    rows = fetch(queries.DROP_OF_OWNER, {"kind": kind, "owner_id": owner_id, "reason": reason, "now": timezone.now()})
    return _counted_drops(kind, rows)


def deliveries_drop_of_receiver(*, kind: str, receiver_id: str, reason: str) -> list[Delivery]:
    rows = fetch(
        queries.DROP_OF_RECEIVER, {"kind": kind, "receiver_id": receiver_id, "reason": reason, "now": timezone.now()}
    )
    return _counted_drops(kind, rows)


def _counted_drops(kind: str, rows: list[tuple[Any, ...]]) -> list[Delivery]:
    sender = sender_for(kind)
    dropped = [Delivery(kind=kind, channel=row[0]) for row in rows]
    if sender is not None:
        for delivery in dropped:
            sender.count(delivery, "dropped")
    return dropped


# --- sent again ------------------------------------------------------------------------------------------


def delivery_resend(*, delivery_id: str) -> bool:
    """Send a delivery again with its own event id (a replay): a finished one is pending
    again, due at once, and its send task is enqueued after commit; its tries go on
    counting. False when it is being sent this moment (that try stands)."""
    if execute(queries.RESEND, {"id": delivery_id, "now": timezone.now()}) != 1:
        return False
    deliveries_enqueue([delivery_id])
    return True


# --- the dispatcher ------------------------------------------------------------------------------------


def deliveries_dispatch(*, now: dt.datetime | None = None, limit: int | None = None) -> dict[str, int]:
    """Beat's pass: claims whose task died are pending again, and every due delivery
    (a retry whose time came, a new one whose message was lost) gets a send task."""
    now = now or timezone.now()
    reclaimed = execute(queries.RECLAIM, {"now": now})
    due = [row[0] for row in fetch(queries.DUE, {"now": now, "limit": limit or settings.DELIVERY_DISPATCH_BATCH_SIZE})]
    # The next pass enqueues again whatever is still due: a message it outlived is dropped
    # unsent, so a stopped worker does not come back to a pile of copies.
    _enqueue(due, expires=2 * settings.DELIVERY_DISPATCH_INTERVAL_SECONDS)
    return {"reclaimed": reclaimed, "enqueued": len(due)}


# --- the tasks (exported by delivery.tasks) ------------------------------------------------------------


@shared_task(name=SEND_TASK, ignore_result=True)
def send(delivery_id: str) -> None:
    with bound(deliveryId=delivery_id):
        delivery_send(delivery_id=delivery_id)


@shared_task(name="delivery.tasks.dispatch", ignore_result=True)
def dispatch() -> dict[str, int]:
    return deliveries_dispatch()
