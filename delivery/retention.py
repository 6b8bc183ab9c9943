"""What retention deletes of the outbox: push and webhook deliveries finished
(delivered, failed or dropped) more than ``DELIVERY_RETENTION_DAYS`` ago, with their
attempts (they cascade); ``0`` deletes every finished one. Read from
``delivery_finished``; an open delivery (pending, sending) has no ``finished_at``."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import QuerySet

from config.retention import Sweep
from delivery.models import FINISHED_STATUSES, Delivery


def deliveries_due(now: dt.datetime) -> QuerySet[Delivery]:
    before = now - dt.timedelta(days=settings.DELIVERY_RETENTION_DAYS)
    return Delivery.objects.filter(status__in=FINISHED_STATUSES, finished_at__lte=before)


DELIVERIES = Sweep(kind="deliveries", due=deliveries_due, order_by="finished_at")
