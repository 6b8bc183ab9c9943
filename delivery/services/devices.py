"""Learners' devices (contract 11.1): registered by their APNs or FCM token, which is
validated, kept to send to and never shown. The same token again is the same device,
moved to whoever registered it last and enabled again; a user holds at most
``PUSH_MAX_DEVICES_PER_USER``, the one registered longest ago going first. A device
deleted, moved or dropped by the cap is sent nothing more: its unsent pushes are
dropped. Users are named by their key, a plain value (this app knows no user model)."""

from __future__ import annotations

import hashlib
import re

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from config.errors import DomainError, ErrorCode
from delivery.models import Device, Platform
from delivery.services.outbox import deliveries_drop_of_receiver

PUSH_KIND = "push"
_TOKEN_RULES = {
    Platform.IOS: (re.compile(r"[0-9A-Fa-f]{64,200}"), "an iOS token is 64 to 200 hexadecimal characters"),
    Platform.ANDROID: (
        re.compile(r"[A-Za-z0-9_:.\-]{1,4096}"),
        "an Android token is 1 to 4096 characters of letters, digits and _ : . -",
    ),
}
# BCP 47 as phones send it: a language subtag, then subtags of letters and digits.
_LOCALE = re.compile(r"[A-Za-z]{2,8}(?:-[A-Za-z0-9]{1,8})*")
_LOCALE_MAX = 35
_APP_VERSION_MAX = 64


def _validated(platform: str, token: str, locale: str | None, app_version: str | None) -> None:
    """Every bad field named at once (contract section 1), not the first one alone."""
    problems: dict[str, str] = {}
    rule = _TOKEN_RULES.get(platform) if isinstance(platform, str) else None
    if rule is None:
        problems["platform"] = "platform is ios or android"
    elif not isinstance(token, str) or rule[0].fullmatch(token) is None:
        problems["token"] = rule[1]
    if locale is not None and (len(locale) > _LOCALE_MAX or _LOCALE.fullmatch(locale) is None):
        problems["locale"] = "locale is a BCP 47 language tag such as en, zh-Hans-CN"
    if app_version is not None and len(app_version) > _APP_VERSION_MAX:
        problems["appVersion"] = f"appVersion is at most {_APP_VERSION_MAX} characters"
    if problems:
        raise DomainError(
            ErrorCode.VALIDATION_ERROR, "; ".join(problems.values()), fields={k: [v] for k, v in problems.items()}
        )


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def device_register(
    *, user_id: int, platform: str, token: str, locale: str | None = None, app_version: str | None = None
) -> tuple[Device, bool]:
    """Register a device for the user; ``(device, created)``. A token already known
    is that device: its locale and app version updated, moved to this user, enabled."""
    _validated(platform, token, locale, app_version)
    if platform == Platform.IOS:
        token = token.lower()  # hexadecimal: one token however the app spells it, so one device
    digest = token_digest(token)
    now = timezone.now()
    with transaction.atomic():
        device = Device.objects.select_for_update().filter(platform=platform, token_digest=digest).first()
        created = device is None
        if device is None:
            try:
                with transaction.atomic():
                    device = Device.objects.create(
                        user_id=user_id, platform=platform, token=token, token_digest=digest,
                        locale=locale or "en", app_version=app_version or "", created_at=now, registered_at=now,
                    )  # fmt: skip
            except IntegrityError:  # registered this moment by another request: that device
                device = Device.objects.select_for_update().get(platform=platform, token_digest=digest)
                created = False
        if not created:
            if device.user_id != user_id:  # what was written for its last owner is not for this one
                deliveries_drop_of_receiver(
                    kind=PUSH_KIND, receiver_id=device.id, reason="device moved to another user"
                )
            device.user_id = user_id
            device.locale = locale or device.locale
            device.app_version = device.app_version if app_version is None else app_version
            device.enabled = True
            device.disabled_reason = ""
            device.registered_at = now
            device.save(update_fields=["user", "locale", "app_version", "enabled", "disabled_reason", "registered_at"])
        _cap(user_id)
    return device, created


def _cap(user_id: int) -> None:
    beyond = list(
        Device.objects.filter(user_id=user_id)
        .order_by("-registered_at", "-id")
        .values_list("id", flat=True)[settings.PUSH_MAX_DEVICES_PER_USER :]
    )
    for device_id in beyond:
        deliveries_drop_of_receiver(kind=PUSH_KIND, receiver_id=device_id, reason="device dropped by the cap")
    if beyond:
        Device.objects.filter(id__in=beyond).delete()


def device_delete(*, user_id: int, device_id: str) -> None:
    """Delete one of the user's devices; nothing more is sent to it. Another user's
    device is not found, exactly as a missing one."""
    with transaction.atomic():
        deleted, _ = Device.objects.filter(id=device_id, user_id=user_id).delete()
        if not deleted:
            raise DomainError(ErrorCode.NOT_FOUND, f"Device {device_id} not found")
        deliveries_drop_of_receiver(kind=PUSH_KIND, receiver_id=device_id, reason="device deleted")


def device_list(*, user_id: int) -> QuerySet[Device]:
    return Device.objects.filter(user_id=user_id).order_by("-registered_at", "-id")


def device_disable(*, device_id: str, reason: str) -> None:
    """The provider said the token is dead: nothing more until it is registered again."""
    Device.objects.filter(id=device_id, enabled=True).update(enabled=False, disabled_reason=reason[:100])


def device_pushed(*, device_id: str) -> None:
    Device.objects.filter(id=device_id).update(last_push_at=timezone.now())
