"""APNs, Apple's provider API (contract 11.2): HTTP/2 with token-based
authentication, through httpx (``http2=True``, the ``h2`` package) and PyJWT.

The provider token is an ES256 JWT signed with the team's ``.p8`` key
(``APNS_KEY_FILE``), header ``kid`` = ``APNS_KEY_ID``, claims ``iss`` = ``APNS_TEAM_ID``
and ``iat``. Apple refuses a token renewed too often and one too old (contract 11.2
gives the window): one token per process, renewed after ``TOKEN_REUSE_SECONDS``, or
at once when Apple answers ``ExpiredProviderToken``/``InvalidProviderToken``. One
HTTP/2 connection per process carries every push (Apple asks providers to keep it open).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
from django.conf import settings

from delivery.senders.tls import Http2Client
from delivery.services.outbox import Answer, Outcome, retry_after_seconds

TOKEN_REUSE_SECONDS = 40 * 60  # inside the reuse window of contract 11.2 (tests/test_push.py checks it)
_DEAD_TOKEN_REASONS = {"BadDeviceToken", "DeviceTokenNotForTopic"}  # with a 400; a 410 whatever its reason
_PROVIDER_TOKEN_REASONS = {"ExpiredProviderToken", "InvalidProviderToken"}


def configured() -> bool:
    return all((settings.APNS_KEY_FILE, settings.APNS_KEY_ID, settings.APNS_TEAM_ID, settings.APNS_TOPIC))


@dataclass(frozen=True)
class Alert:
    device_token: str
    job_id: str
    job_type: str
    title: str
    body: str
    badge: int
    data: dict[str, Any]  # jobId, notificationId, jobType, status


class _ProviderToken:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._token = ""
        self._issued = 0.0
        self._signed_by: tuple[str, str, str] = ("", "", "")

    def get(self, *, instead_of: str = "") -> str:
        """The current token; a new one when it is due, when the settings changed, or
        when ``instead_of`` (the token Apple just refused) is still the current one."""
        signer = (settings.APNS_KEY_FILE, settings.APNS_KEY_ID, settings.APNS_TEAM_ID)
        with self._lock:
            stale = time.monotonic() - self._issued >= TOKEN_REUSE_SECONDS
            if not self._token or stale or signer != self._signed_by or (instead_of and instead_of == self._token):
                key = Path(settings.APNS_KEY_FILE).read_text()
                self._token = jwt.encode(
                    {"iss": settings.APNS_TEAM_ID, "iat": int(time.time())},
                    key,
                    algorithm="ES256",
                    headers={"kid": settings.APNS_KEY_ID},
                )
                self._issued = time.monotonic()
                self._signed_by = signer
            return self._token


PROVIDER_TOKEN = _ProviderToken()
CONNECTION = Http2Client("APNS_ENDPOINT")


def _reason(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get("reason", ""))[:100] if isinstance(body, dict) else ""


def send(alert: Alert, *, renewed: Any = None) -> Answer:
    """One push; a refused provider token is renewed and the push tried once more
    (``renewed()`` is called then, for the metric)."""
    body = {
        "aps": {
            "alert": {"title": alert.title, "body": alert.body},
            "badge": alert.badge,
            "sound": "default",
            "thread-id": alert.job_type,
        },
        **alert.data,
    }
    content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    url = f"{settings.APNS_ENDPOINT.rstrip('/')}/3/device/{alert.device_token}"
    refused = ""
    for last in (False, True):
        bearer = PROVIDER_TOKEN.get(instead_of=refused)
        headers = {
            "authorization": f"bearer {bearer}",
            "apns-topic": settings.APNS_TOPIC,
            "apns-push-type": "alert",
            "apns-priority": "10",
            "apns-collapse-id": alert.job_id,
            "apns-expiration": str(int(time.time()) + settings.PUSH_TTL_SECONDS),
            "content-type": "application/json",
        }
        try:
            response = CONNECTION.get().post(url, headers=headers, content=content)
        except httpx.HTTPError as error:
            return Answer(Outcome.RETRY, error=f"APNs not reached: {type(error).__name__}")
        code, reason = response.status_code, _reason(response)
        if 200 <= code < 300:
            return Answer(Outcome.DELIVERED, status_code=code)
        if code == 403 and reason in _PROVIDER_TOKEN_REASONS and not last:
            refused = bearer
            if renewed is not None:
                renewed()
            continue
        error = f"APNs answered {code}" + (f" {reason}" if reason else "")
        if code == 410 or (code == 400 and reason in _DEAD_TOKEN_REASONS):
            return Answer(Outcome.FAILED, status_code=code, error=error, note="device_disabled")
        if code == 429 or code >= 500:
            return Answer(
                Outcome.RETRY, status_code=code, error=error,
                retry_after=retry_after_seconds(response.headers.get("retry-after")),
            )  # fmt: skip
        return Answer(Outcome.FAILED, status_code=code, error=error)
    raise AssertionError("unreachable")  # pragma: no cover
