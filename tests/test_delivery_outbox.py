"""The one outbox (delivery.services.outbox, DESIGN rule 12): rows written in the
event's transaction, sent after commit by a task that claims each one with a conditional
update (a task run twice, or two at once, sends once), retried on its sender's schedule,
picked up again by the dispatcher, dropped when it is not to be sent any more.

The receiver here is a sender registered for a kind of its own that records what it is
handed: what is under test is the engine, with every sender it will carry."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator

import pytest
from django.db import connection, transaction
from django.utils import timezone

from delivery.models import Delivery, DeliveryAttempt, DeliveryStatus
from delivery.services import outbox
from delivery.services.outbox import Answer, Backoff, FixedSchedule, Outcome
from tests.support.concurrency import run_together

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.embedded]

KIND = "test-recorder"


class Recorder(outbox.Sender):
    kind = KIND

    def __init__(self, schedule: Backoff | FixedSchedule) -> None:
        self.schedule = schedule
        self.answers: list[Answer] = []
        self.sent: list[tuple[str, dict]] = []
        self.counted: list[str] = []
        self.pause = 0.0
        self._lock = threading.Lock()

    def send(self, delivery: Delivery) -> Answer:
        time.sleep(self.pause)  # a slow receiver: the window in which a second task could send too
        with self._lock:
            self.sent.append((delivery.receiver_id, delivery.payload))
            return self.answers.pop(0) if self.answers else Answer(Outcome.DELIVERED, status_code=200)

    def count(self, delivery: Delivery, outcome: str) -> None:
        with self._lock:
            self.counted.append(outcome)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    sender = Recorder(Backoff(base=5, max_attempts=3))
    outbox.sender_register(sender)
    yield sender
    outbox._SENDERS.pop(KIND, None)


@pytest.fixture
def eager(settings) -> None:
    """Celery runs the enqueued task in place (after commit, as a worker would)."""
    settings.CELERY_TASK_ALWAYS_EAGER = True


def write(event_id: str = "evt_1", receivers=(("rcv_a", "ch"), ("rcv_b", "ch")), **kwargs) -> list[str]:
    return outbox.deliveries_write(
        kind=KIND, event_id=event_id, owner_id="owner-1", receivers=list(receivers), payload={"n": 1}, **kwargs
    )


def test_an_event_rolled_back_sends_nothing_and_one_committed_is_sent_once_per_receiver_after_commit(
    recorder: Recorder, eager: None
):
    with pytest.raises(RuntimeError), transaction.atomic():
        write("evt_rolled_back")
        assert recorder.sent == []  # nothing before commit
        raise RuntimeError
    assert Delivery.objects.count() == 0
    with transaction.atomic():
        write()
        assert recorder.sent == []
    assert sorted(recorder.sent) == [("rcv_a", {"n": 1}), ("rcv_b", {"n": 1})]
    assert set(Delivery.objects.values_list("status", flat=True)) == {DeliveryStatus.DELIVERED}
    assert DeliveryAttempt.objects.filter(outcome="delivered", number=1, status_code=200).count() == 2
    assert recorder.counted == ["delivered", "delivered"]


def test_the_same_event_written_twice_for_a_receiver_is_one_delivery(recorder: Recorder):
    write()
    write()
    assert Delivery.objects.count() == 2


def test_a_task_run_twice_sends_once(recorder: Recorder):
    [first, _] = write()
    assert outbox.delivery_send(delivery_id=first) == DeliveryStatus.DELIVERED
    assert outbox.delivery_send(delivery_id=first) is None
    assert recorder.sent == [("rcv_a", {"n": 1})]


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_two_tasks_at_once_for_one_delivery_send_it_once(recorder: Recorder):
    [first, _] = write()
    recorder.pause = 0.3
    results = run_together(4, lambda _: outbox.delivery_send(delivery_id=first))
    assert sorted(results, key=str) == sorted([DeliveryStatus.DELIVERED, None, None, None], key=str)
    assert recorder.sent == [("rcv_a", {"n": 1})]
    assert DeliveryAttempt.objects.filter(delivery_id=first).count() == 1


def test_a_retry_waits_for_its_time_and_the_dispatcher_sends_it_then(recorder: Recorder, eager: None):
    with transaction.atomic():
        [first] = write(receivers=[("rcv_a", "ch")])
        recorder.answers.append(Answer(Outcome.RETRY, status_code=503, retry_after=30))
        before = timezone.now()
    # The after-commit task's try got a 503.
    row = Delivery.objects.get(id=first)
    assert (row.status, row.attempts, row.last_status_code) == (DeliveryStatus.PENDING, 1, 503)
    assert row.next_attempt_at >= before + dt.timedelta(seconds=30)  # Retry-After honoured over the backoff
    assert outbox.delivery_send(delivery_id=first) is None  # not due: a second message sends nothing
    assert outbox.deliveries_dispatch()["enqueued"] == 0
    assert len(recorder.sent) == 1
    Delivery.objects.filter(id=first).update(next_attempt_at=timezone.now())  # its time came
    assert outbox.deliveries_dispatch()["enqueued"] == 1
    assert len(recorder.sent) == 2
    row.refresh_from_db()
    assert (row.status, row.attempts) == (DeliveryStatus.DELIVERED, 2)
    assert list(DeliveryAttempt.objects.filter(delivery_id=first).values_list("outcome", "status_code")) == [
        ("retried", 503),
        ("delivered", 200),
    ]
    assert recorder.counted == ["retried", "delivered"]


def test_a_delivery_out_of_tries_or_past_its_expiry_is_failed(recorder: Recorder):
    [first] = write(receivers=[("rcv_a", "ch")])
    for _ in range(3):
        recorder.answers.append(Answer(Outcome.RETRY, status_code=500))
        Delivery.objects.filter(id=first).update(next_attempt_at=timezone.now())
        outbox.delivery_send(delivery_id=first)
    row = Delivery.objects.get(id=first)
    assert (row.status, row.attempts) == (DeliveryStatus.FAILED, 3)  # Backoff(max_attempts=3)
    assert recorder.counted == ["retried", "retried", "failed"]
    [late] = write("evt_late", receivers=[("rcv_a", "ch")], expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert outbox.delivery_send(delivery_id=late) == DeliveryStatus.FAILED
    assert len(recorder.sent) == 3  # an expired one is never sent


def test_a_fixed_schedule_tries_once_then_once_after_each_interval():
    schedule = outbox.schedule_parse("5s,5m,30m,2h,5h,10h,10h")
    assert schedule.intervals == (5, 300, 1800, 7200, 18000, 36000, 36000)
    assert [schedule.delay(n) for n in range(1, 9)] == [5, 300, 1800, 7200, 18000, 36000, 36000, None]
    with pytest.raises(ValueError):
        outbox.schedule_parse("5 minutes")


def test_backoff_doubles_with_jitter_and_honours_retry_after():
    backoff = Backoff(base=5, max_attempts=5)
    for attempts, ceiling in [(1, 5), (2, 10), (3, 20), (4, 40)]:
        delays = {backoff.delay(attempts) for _ in range(50)}
        assert all(ceiling / 2 <= d <= ceiling for d in delays) and len(delays) > 1
    assert backoff.delay(5) is None
    assert backoff.delay(1, retry_after=120) == 120
    assert outbox.retry_after_seconds("17") == 17
    now = timezone.now()
    assert outbox.retry_after_seconds("Wed, 21 Oct 2065 07:28:00 GMT", now=now) > 0
    assert outbox.retry_after_seconds("soon") is None
    # a receiver's value is bounded: no date arithmetic overflows on it, no odd digit is read
    week = 7 * 86400
    assert outbox.retry_after_seconds("9" * 400) == week
    assert outbox.retry_after_seconds("Fri, 31 Dec 9999 23:59:59 GMT", now=now) == week
    assert outbox.retry_after_seconds("\u00b2") is None
    assert timezone.now() + dt.timedelta(seconds=outbox.retry_after_seconds("9" * 400)) > now


def test_a_claim_whose_task_died_is_taken_back_by_the_dispatcher(recorder: Recorder):
    [first] = write(receivers=[("rcv_a", "ch")])
    Delivery.objects.filter(id=first).update(
        status=DeliveryStatus.SENDING, attempts=1, claimed_until=timezone.now() - dt.timedelta(seconds=1)
    )
    assert outbox.deliveries_dispatch()["reclaimed"] == 1
    assert outbox.delivery_send(delivery_id=first) == DeliveryStatus.DELIVERED
    assert Delivery.objects.get(id=first).attempts == 2


def test_a_new_delivery_whose_message_was_lost_is_sent_by_the_dispatcher(recorder: Recorder, eager: None, settings):
    with transaction.atomic():
        [first] = write(receivers=[("rcv_a", "ch")])
        transaction.get_connection().run_on_commit.clear()  # the message never reached the broker
    assert recorder.sent == []
    assert outbox.deliveries_dispatch()["enqueued"] == 0  # not before its after-commit task had its chance
    later = timezone.now() + dt.timedelta(seconds=settings.DELIVERY_DISPATCH_INTERVAL_SECONDS + 1)
    Delivery.objects.filter(id=first).update(next_attempt_at=later - dt.timedelta(seconds=2))
    assert outbox.deliveries_dispatch(now=later)["enqueued"] == 1
    assert recorder.sent == [("rcv_a", {"n": 1})]


def test_dropping_an_owners_unsent_deliveries_leaves_the_finished_ones(recorder: Recorder):
    [sent, unsent] = write()
    outbox.delivery_send(delivery_id=sent)
    dropped = outbox.deliveries_drop_of_owner(kind=KIND, owner_id="owner-1", reason="consent withdrawn")
    assert len(dropped) == 1 and recorder.counted == ["delivered", "dropped"]
    assert Delivery.objects.get(id=unsent).status == DeliveryStatus.DROPPED
    assert Delivery.objects.get(id=sent).status == DeliveryStatus.DELIVERED
    assert outbox.delivery_send(delivery_id=unsent) is None
    assert len(recorder.sent) == 1


def test_a_sender_that_raises_is_retried_not_lost(recorder: Recorder):
    [first] = write(receivers=[("rcv_a", "ch")])

    def broken(delivery: Delivery) -> Answer:
        raise ValueError("a bug in a sender")

    recorder.send = broken  # type: ignore[method-assign]
    assert outbox.delivery_send(delivery_id=first) == DeliveryStatus.PENDING
    assert "ValueError" in Delivery.objects.get(id=first).last_error
    assert connection.vendor in ("postgresql", "sqlite")


def test_a_finished_delivery_resent_goes_again_with_its_event_id(recorder: Recorder, eager: None):
    [first] = write(receivers=[("rcv_a", "ch")])  # outside a transaction: sent at once
    assert Delivery.objects.get(id=first).status == DeliveryStatus.DELIVERED
    with transaction.atomic():
        assert outbox.delivery_resend(delivery_id=first) is True
        assert len(recorder.sent) == 1  # not before commit
    assert len(recorder.sent) == 2
    row = Delivery.objects.get(id=first)
    assert (row.status, row.event_id, row.attempts) == (DeliveryStatus.DELIVERED, "evt_1", 2)
    assert outbox.delivery_resend(delivery_id="dlv_missing") is False
