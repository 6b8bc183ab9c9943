"""Pushes to a user's devices (contract 11.2), through the outbox.

What a caller (``ai_jobs``' notices) hands over, all plain values:

- ``pushes_write(user_id=..., event_id=..., payload={...})`` in the event's own
  transaction: one delivery per enabled device of the user, written by one
  ``INSERT ... SELECT`` and sent after commit. ``payload`` carries what the push says:
  ``jobId``, ``notificationId``, ``jobType``, ``status``, and ``words``: for each
  language of ``settings.LANGUAGES`` (``en``, ``zh-hans``) a ``{"title", "body"}``
  the caller rendered from its translation catalogues. A device's locale picks one
  (``language_of``).
- ``pushes_write_many(events=[PushEvent(user_id, event_id, payload), ...])``: the
  same for several events at once (a batch of failures).
- ``pushes_drop_of_user(user_id=...)`` when the user withdraws consent: what is not
  sent yet never will be.
- ``recipient_lookup_set(lookup)`` once, at startup: ``lookup(user_id)`` answers a
  ``Recipient`` (does the user consent to pushes now; the badge, their unread
  notices), read when each push is sent.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from config.ids import new_id
from config.sql import fetch
from delivery import queries
from delivery.models import Delivery, Device
from delivery.services.devices import PUSH_KIND
from delivery.services.outbox import deliveries_drop_of_owner, deliveries_enqueue, first_due


@dataclass(frozen=True)
class Recipient:
    consents: bool
    badge: int


def _everyone(user_id: int) -> Recipient:
    return Recipient(consents=True, badge=0)


_lookup: Callable[[int], Recipient] = _everyone


def recipient_lookup_set(lookup: Callable[[int], Recipient]) -> None:
    global _lookup
    _lookup = lookup


def recipient_of(user_id: int) -> Recipient:
    return _lookup(user_id)


def language_of(locale: str) -> str:
    """The catalogue a device's BCP 47 locale reads: Simplified Chinese for every
    ``zh`` tag (``zh``, ``zh-CN``, ``zh-Hans-CN``, ``zh-TW``), English otherwise."""
    return "zh-hans" if locale.lower().split("-")[0].split("_")[0] == "zh" else "en"


def pushes_write(*, user_id: int, event_id: str, payload: dict[str, Any]) -> list[str]:
    """One push per enabled device of the user, in the caller's transaction; sent
    after it commits. The deliveries' ids (none for a user with no device)."""
    now = timezone.now()
    rows = fetch(
        queries.PUSHES_FOR_USER,
        {
            "batch_id": new_id("dlv"),
            "event_id": event_id,
            "owner_id": str(user_id),
            "user_id": user_id,
            "payload": json.dumps(payload, ensure_ascii=False, separators=(",", ":")),
            "next_attempt_at": first_due(now),
            "expires_at": now + dt.timedelta(seconds=settings.PUSH_TTL_SECONDS),
            "now": now,
        },
    )
    ids = [row[0] for row in rows]
    deliveries_enqueue(ids)
    return ids


@dataclass(frozen=True)
class PushEvent:
    user_id: int
    event_id: str
    payload: dict[str, Any]


def pushes_write_many(*, events: list[PushEvent]) -> list[str]:
    """``pushes_write`` for each event. One event (a result's notice) is one
    statement; several (a batch of failures) first read which of their users have a
    device at all, so users without one cost nothing more."""
    if len(events) > 1:
        users = {event.user_id for event in events}
        users &= set(Device.objects.filter(user_id__in=users, enabled=True).values_list("user_id", flat=True))
        events = [event for event in events if event.user_id in users]
    ids: list[str] = []
    for event in events:
        ids += pushes_write(user_id=event.user_id, event_id=event.event_id, payload=event.payload)
    return ids


def pushes_drop_of_user(*, user_id: int, reason: str) -> int:
    return len(deliveries_drop_of_owner(kind=PUSH_KIND, owner_id=str(user_id), reason=reason))


def pushes_on_user_deleting(sender: type, instance: Any, **kwargs: Any) -> None:
    """``pre_delete`` of a user: their pushes go with them, with their attempts (a
    delivery names its owner as a plain value, so no foreign key takes them)."""
    Delivery.objects.filter(kind=PUSH_KIND, owner_id=str(instance.pk)).delete()
