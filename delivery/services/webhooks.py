"""Webhooks (contract section 11.3): tenants' endpoints, the deliveries written for an
event, and the sender that signs and posts them, on the one outbox (DESIGN rule 12).

This module knows no tenant and no task: its caller (model-asynch) hands it plain
values, the owner's id, the event's id and type, what it is about and its body.

- Endpoints: ``endpoint_create`` (the secret, ``whsec_`` + base64 of random bytes, is
  returned once and kept sealed with the platform's keyring), ``endpoint_update``,
  ``endpoint_delete``, ``endpoint_rotate_secret`` (the previous secret signs beside
  the new one for ``WEBHOOK_SECRET_OVERLAP_SECONDS``). An endpoint's ``url`` passes
  ``config.outbound``'s rules under ``WEBHOOK_ALLOWED_HOSTS`` when it is saved, and
  again as each connection opens.
- ``webhooks_write``: one delivery per enabled endpoint of the owner that takes the
  event, in the caller's transaction; the event's id is the ``webhook-id`` of every
  try to every endpoint.
- ``WebhookSender``: one try, signed with the ``standardwebhooks`` library; a ``2xx``
  within ``WEBHOOK_TIMEOUT_SECONDS`` is delivered, anything else (a ``3xx`` included,
  redirects are never followed) is tried again on ``WEBHOOK_RETRY_SCHEDULE``, then
  failed. A try the URL rules refuse sends nothing and says only "refused". An endpoint
  whose every try failed for ``WEBHOOK_DISABLE_AFTER_DAYS`` is disabled.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import requests
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook
from urllib3.util import Timeout

from config import keyring, outbound
from config.errors import DomainError, ErrorCode
from config.ids import new_id
from config.observability.metrics import WEBHOOK_DELIVERIES, WEBHOOK_OUTCOMES
from delivery.models import Delivery, WebhookEndpoint, WebhookEvent
from delivery.services import outbox

KIND = "webhook"
ALLOW_LIST = "WEBHOOK_ALLOWED_HOSTS"
EVENTS: tuple[str, ...] = tuple(WebhookEvent.values)
SECRET_CONTEXT = b"delivery-webhook-secret"
SECRET_PREFIX = "whsec_"
_SECRET_BYTES = 32


# --- secrets ----------------------------------------------------------------------------------------


def _secret_new() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(_SECRET_BYTES)).decode()


def _seal(secret: str) -> str:
    return keyring.seal_text(secret, context=SECRET_CONTEXT)


def signing_secrets(endpoint: WebhookEndpoint, *, now: dt.datetime) -> list[str]:
    """The secrets that sign a try now: the current one, and the previous one while
    its overlap lasts."""
    found = [keyring.open_text(endpoint.secret_encrypted, context=SECRET_CONTEXT)]
    if endpoint.previous_secret_encrypted and endpoint.previous_secret_until and endpoint.previous_secret_until > now:
        found.append(keyring.open_text(endpoint.previous_secret_encrypted, context=SECRET_CONTEXT))
    return found


# --- endpoints --------------------------------------------------------------------------------------


def _refused_url(problem: str) -> DomainError:
    return DomainError(ErrorCode.VALIDATION_ERROR, problem, fields={"url": [problem]})


def url_check(url: str) -> None:
    """Refuse a ``url`` the sender would not post to (``config.outbound``'s rules)."""
    problem = outbound.problem(url, ALLOW_LIST)
    if problem:
        raise _refused_url(problem)


def _not_found(endpoint_id: str) -> DomainError:
    return DomainError(ErrorCode.NOT_FOUND, f"Webhook endpoint {endpoint_id} not found")


def _events(events: Sequence[str] | None) -> list[str]:
    chosen = list(dict.fromkeys(events if events is not None else EVENTS))
    unknown = [event for event in chosen if event not in EVENTS]
    if unknown or not chosen:
        message = f"A non-empty subset of {', '.join(EVENTS)}."
        raise DomainError(ErrorCode.VALIDATION_ERROR, message, fields={"events": [message]})
    return chosen


@dataclass(frozen=True)
class IssuedSecret:
    endpoint: WebhookEndpoint
    secret: str  # shown once, never stored in clear

    def __repr__(self) -> str:
        return f"IssuedSecret({self.endpoint.id}, ****)"


def endpoint_create(
    *, owner_id: str, url: str, events: Sequence[str] | None = None, description: str = ""
) -> IssuedSecret:
    """A new endpoint of the owner, enabled, with a new secret."""
    chosen = _events(events)
    url_check(url)
    secret = _secret_new()
    now = timezone.now()
    endpoint = WebhookEndpoint.objects.create(
        owner_id=owner_id,
        url=url,
        events=chosen,
        description=description,
        secret_encrypted=_seal(secret),
        created_at=now,
        updated_at=now,
    )
    return IssuedSecret(endpoint=endpoint, secret=secret)


def endpoint_get(*, owner_id: str, endpoint_id: str) -> WebhookEndpoint:
    endpoint = WebhookEndpoint.objects.filter(owner_id=owner_id, id=endpoint_id).first()
    if endpoint is None:
        raise _not_found(endpoint_id)
    return endpoint


def endpoint_update(
    *,
    owner_id: str,
    endpoint_id: str,
    url: str | None = None,
    events: Sequence[str] | None = None,
    description: str | None = None,
    enabled: bool | None = None,
) -> WebhookEndpoint:
    """A partial update: only what is given changes. ``enabled=True`` turns a disabled
    endpoint back on, its failures forgotten."""
    changes: dict[str, Any] = {}
    if url is not None:
        url_check(url)
        changes["url"] = url
    if events is not None:
        changes["events"] = _events(events)
    if description is not None:
        changes["description"] = description
    if enabled is not None:
        changes["enabled"] = enabled
        changes["disabled_reason"] = "" if enabled else "disabled by its owner"
        if enabled:
            changes["failing_since"] = None
    changes["updated_at"] = timezone.now()
    if WebhookEndpoint.objects.filter(owner_id=owner_id, id=endpoint_id).update(**changes) != 1:
        raise _not_found(endpoint_id)
    return endpoint_get(owner_id=owner_id, endpoint_id=endpoint_id)


def endpoint_delete(*, owner_id: str, endpoint_id: str) -> None:
    """The endpoint goes; what was not sent to it yet is dropped (its finished
    deliveries stay until retention takes them)."""
    with transaction.atomic():
        deleted, _ = WebhookEndpoint.objects.filter(owner_id=owner_id, id=endpoint_id).delete()
        if not deleted:
            raise _not_found(endpoint_id)
        outbox.deliveries_drop_of_receiver(kind=KIND, receiver_id=endpoint_id, reason="the endpoint was deleted")


def endpoint_rotate_secret(*, owner_id: str, endpoint_id: str) -> IssuedSecret:
    """A new secret; the one it replaces signs beside it for
    ``WEBHOOK_SECRET_OVERLAP_SECONDS`` (a receiver that still knows only the old
    one verifies every try meanwhile)."""
    secret = _secret_new()
    now = timezone.now()
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().filter(owner_id=owner_id, id=endpoint_id).first()
        if endpoint is None:
            raise _not_found(endpoint_id)
        WebhookEndpoint.objects.filter(id=endpoint_id).update(
            secret_encrypted=_seal(secret),
            previous_secret_encrypted=endpoint.secret_encrypted,
            previous_secret_until=now + dt.timedelta(seconds=settings.WEBHOOK_SECRET_OVERLAP_SECONDS),
            updated_at=now,
        )
    return IssuedSecret(endpoint=endpoint_get(owner_id=owner_id, endpoint_id=endpoint_id), secret=secret)


# --- deliveries ---------------------------------------------------------------------------------------


def webhooks_write(*, owner_id: str, event_type: str, about: str, body: dict[str, Any]) -> list[str]:
    """One delivery of ``body`` per enabled endpoint of the owner that takes
    ``event_type``, in the caller's transaction, sent after it commits. ``about`` is
    what the event concerns (a task's id), listed with the delivery. The ids written."""
    receivers = [
        (endpoint_id, "")
        for endpoint_id, events in WebhookEndpoint.objects.filter(owner_id=owner_id, enabled=True)
        .order_by("id")
        .values_list("id", "events")
        if event_type in (events or ())
    ]
    if not receivers:
        return []
    # The body is kept as the very text every try sends and signs.
    payload = {"eventType": event_type, "about": about, "body": json.dumps(body, separators=(",", ":"))}
    return outbox.deliveries_write(
        kind=KIND, event_id=new_id("msg"), owner_id=owner_id, receivers=receivers, payload=payload
    )


def webhook_delivery_get(*, owner_id: str, delivery_id: str) -> Delivery:
    found = Delivery.objects.filter(kind=KIND, owner_id=owner_id, id=delivery_id).first()
    if found is None:
        raise DomainError(ErrorCode.NOT_FOUND, f"Delivery {delivery_id} not found")
    return found


def webhook_replay(*, owner_id: str, delivery_id: str) -> Delivery:
    """Send one of the owner's deliveries again, with its original ``webhook-id``."""
    delivery = webhook_delivery_get(owner_id=owner_id, delivery_id=delivery_id)
    outbox.delivery_resend(delivery_id=delivery.id)
    return delivery


def webhooks_replay(*, delivery_ids: Sequence[str]) -> int:
    """An operator's replay (admin): how many were sent again."""
    ids = Delivery.objects.filter(kind=KIND, id__in=list(delivery_ids)).values_list("id", flat=True)
    return sum(outbox.delivery_resend(delivery_id=delivery_id) for delivery_id in ids)


# --- the sender ---------------------------------------------------------------------------------------

_local = threading.local()


def _session() -> requests.Session:
    session = getattr(_local, "session", None)
    if session is None:
        session = _local.session = outbound.session(ALLOW_LIST)
    return session


@functools.lru_cache(maxsize=8)
def _schedule(text: str) -> outbox.FixedSchedule:
    return outbox.schedule_parse(text)


def signature_header(secrets_: Sequence[str], *, msg_id: str, at: dt.datetime, body: str) -> str:
    """``webhook-signature``: one ``v1,<base64>`` per secret, separated by a space."""
    return " ".join(Webhook(secret).sign(msg_id, at, body) for secret in secrets_)


class WebhookSender(outbox.Sender):
    kind = KIND

    @property  # type: ignore[override]
    def schedule(self) -> outbox.FixedSchedule:
        return _schedule(settings.WEBHOOK_RETRY_SCHEDULE)

    def send(self, delivery: Delivery) -> outbox.Answer:
        endpoint = WebhookEndpoint.objects.filter(id=delivery.receiver_id).first()
        if endpoint is None:
            return outbox.Answer(outbox.Outcome.DROPPED, error="the endpoint was deleted")
        if not endpoint.enabled:
            return outbox.Answer(outbox.Outcome.DROPPED, error="the endpoint is disabled")
        body = str(delivery.payload.get("body", ""))
        now = timezone.now()
        at = now.replace(microsecond=0)
        headers = {
            "webhook-id": delivery.event_id,
            "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": signature_header(signing_secrets(endpoint, now=now), msg_id=delivery.event_id,
                                                  at=at, body=body),
            "content-type": "application/json",
        }  # fmt: skip
        answer = self._post(endpoint.url, headers, body)
        self._note(endpoint, answer, now)
        return answer

    def _post(self, url: str, headers: dict[str, str], body: str) -> outbox.Answer:
        retry = outbox.Outcome.RETRY
        limit = settings.WEBHOOK_TIMEOUT_SECONDS
        started = time.monotonic()
        try:
            # urllib3's total bounds the connect, the send and the answer's head together:
            # the try's whole time, not each read.
            with _session().post(
                url, data=body.encode(), headers=headers, timeout=Timeout(total=limit), stream=True
            ) as response:
                code = response.status_code
        except outbound.OutboundRefused as refused:
            # Nothing was sent; the reason names the setting, never the host or its address.
            return outbox.Answer(retry, error=f"refused: {refused}")
        except requests.Timeout:
            return outbox.Answer(retry, error=f"no answer within {settings.WEBHOOK_TIMEOUT_SECONDS:g}s")
        except requests.RequestException as error:
            return outbox.Answer(retry, error=f"could not connect ({type(error).__name__})")
        if time.monotonic() - started > limit:  # a 2xx counts only within the try's time
            return outbox.Answer(retry, status_code=code, error=f"no answer within {limit:g}s")
        if 200 <= code < 300:
            return outbox.Answer(outbox.Outcome.DELIVERED, status_code=code)
        # What the receiver said is not kept: the platform never relays what a host answered.
        return outbox.Answer(retry, status_code=code, error=f"HTTP {code}")

    def _note(self, endpoint: WebhookEndpoint, answer: outbox.Answer, now: dt.datetime) -> None:
        """An endpoint's run of failures: forgotten by a delivered try; one lasting
        ``WEBHOOK_DISABLE_AFTER_DAYS`` disables it."""
        endpoints = WebhookEndpoint.objects.filter(id=endpoint.id)
        if answer.outcome == outbox.Outcome.DELIVERED:
            endpoints.exclude(failing_since=None).update(failing_since=None)
            return
        endpoints.filter(failing_since=None).update(failing_since=now)
        cutoff = now - dt.timedelta(days=settings.WEBHOOK_DISABLE_AFTER_DAYS)
        endpoints.filter(enabled=True, failing_since__lte=cutoff).update(
            enabled=False, disabled_reason="every try failed for WEBHOOK_DISABLE_AFTER_DAYS", updated_at=now
        )

    def count(self, delivery: Delivery, outcome: str) -> None:
        if outcome in WEBHOOK_OUTCOMES:
            WEBHOOK_DELIVERIES.inc(outcome)


SENDER = WebhookSender()
