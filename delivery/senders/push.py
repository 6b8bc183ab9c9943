"""The push sender the outbox calls for every delivery of kind ``push``: it reads the
device, asks whether its user still consents and what their badge is
(``push.recipient_of``), picks the words of the device's language, and sends with
APNs or FCM. A platform with no settings gets the stand-in: a log line saying where
the push would have gone, nothing sent, nothing failed (``make run`` shows it so).

Counted as ``aijobs_pushes_total{platform, outcome}``."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from config.observability.metrics import PUSHES
from delivery.models import Delivery, Device, Platform
from delivery.senders import apns, fcm
from delivery.services.devices import PUSH_KIND, device_disable, device_pushed
from delivery.services.outbox import Answer, Backoff, Outcome, Sender, sender_register
from delivery.services.push import language_of, recipient_of

logger = logging.getLogger(__name__)

NOT_CONFIGURED = "not_configured"  # the stand-in's outcome: not a push, not counted


def _words(payload: dict[str, Any], locale: str) -> dict[str, str]:
    words = payload.get("words") or {}
    chosen = words.get(language_of(locale)) or words.get("en") or {}
    return {"title": str(chosen.get("title", "")), "body": str(chosen.get("body", ""))}


def _data(payload: dict[str, Any]) -> dict[str, str]:
    return {key: str(payload.get(key, "")) for key in ("jobId", "notificationId", "jobType", "status")}


def _standin(device: Device, words: dict[str, str], data: dict[str, str]) -> Answer:
    if device.platform == Platform.IOS:
        where = f"APNs at {settings.APNS_ENDPOINT}/3/device/…{device.token_suffix}"
        missing = "APNS_KEY_FILE, APNS_KEY_ID, APNS_TEAM_ID and APNS_TOPIC"
    else:
        where = f"FCM at {settings.FCM_ENDPOINT}/v1/projects/<project_id>/messages:send (token …{device.token_suffix})"
        missing = "FCM_SERVICE_ACCOUNT_FILE"
    logger.info(
        "push stand-in (not sent: %s unset): %s for device %s would go to %s: %r %r (jobId %s)",
        missing, device.platform, device.id, where, words["title"], words["body"], data["jobId"],
    )  # fmt: skip
    return Answer(Outcome.DROPPED, error=f"not sent: {missing} unset (logged by the stand-in)", note=NOT_CONFIGURED)


class PushSender(Sender):
    kind = PUSH_KIND

    @property
    def schedule(self) -> Backoff:  # type: ignore[override]
        return Backoff(base=settings.PUSH_RETRY_BASE_SECONDS, max_attempts=settings.PUSH_MAX_ATTEMPTS)

    def send(self, delivery: Delivery) -> Answer:
        device = Device.objects.filter(id=delivery.receiver_id).first()
        if device is None or str(device.user_id) != delivery.owner_id:
            return Answer(Outcome.DROPPED, error="the device was deleted or registered by another user")
        if not device.enabled:
            return Answer(Outcome.DROPPED, error="the device is disabled")
        recipient = recipient_of(device.user_id)
        if not recipient.consents:
            return Answer(Outcome.DROPPED, error="the user's AI analysis is off")
        words, data = _words(delivery.payload, device.locale), _data(delivery.payload)

        def renewed() -> None:
            PUSHES.inc(device.platform, "retried")

        if device.platform == Platform.IOS:
            if not apns.configured():
                return _standin(device, words, data)
            alert = apns.Alert(device.token, data["jobId"], data["jobType"], words["title"], words["body"],
                               recipient.badge, data)  # fmt: skip
            answer = apns.send(alert, renewed=renewed)
        else:
            if not fcm.configured():
                return _standin(device, words, data)
            message = fcm.Message(device.token, data["jobId"], words["title"], words["body"], data)
            answer = fcm.send(message, renewed=renewed)
        if answer.note == "device_disabled":
            device_disable(device_id=device.id, reason=answer.error)
        elif answer.outcome == Outcome.DELIVERED:
            device_pushed(device_id=device.id)
        return answer

    def count(self, delivery: Delivery, outcome: str) -> None:
        if outcome != NOT_CONFIGURED and delivery.channel:
            PUSHES.inc(delivery.channel, outcome)


sender_register(PushSender())
