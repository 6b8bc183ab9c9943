"""Reads of delivery that views share, owner-scoped."""

from __future__ import annotations

from django.db.models import QuerySet

from delivery.models import Delivery, DeliveryStatus, WebhookEndpoint

# What a webhook delivery's ``status`` is on the wire: one being sent is still pending,
# one dropped (its endpoint deleted or disabled) did not arrive.
WIRE_STATUSES: dict[str, tuple[str, ...]] = {
    "pending": (DeliveryStatus.PENDING, DeliveryStatus.SENDING),
    "delivered": (DeliveryStatus.DELIVERED,),
    "failed": (DeliveryStatus.FAILED, DeliveryStatus.DROPPED),
}


def wire_status(status: str) -> str:
    return next(wire for wire, statuses in WIRE_STATUSES.items() if status in statuses)


def endpoints_list(*, owner_id: str) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.filter(owner_id=owner_id)


def webhook_deliveries_list(
    *, owner_id: str, endpoint_id: str | None = None, status: str | None = None
) -> QuerySet[Delivery]:
    found = Delivery.objects.filter(kind="webhook", owner_id=owner_id)
    if endpoint_id:
        found = found.filter(receiver_id=endpoint_id)
    if status:
        found = found.filter(status__in=WIRE_STATUSES[status])
    return found
