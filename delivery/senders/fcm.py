"""FCM, Google's HTTP v1 API (contract 11.2), with an OAuth 2.0 access token for the
service account in ``FCM_SERVICE_ACCOUNT_FILE``, obtained by google-auth: the JWT
bearer grant (an RS256 assertion signed with the account's key) posted to the file's
own ``token_uri``, scope ``firebase.messaging``. One token per process, reused until it
is about to expire (google-auth's ``valid``), renewed at once when FCM answers ``401``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import google.auth.exceptions
import httpx
from django.conf import settings
from google.auth.transport.requests import Request
from google.oauth2 import service_account

from delivery.senders.tls import Http2Client, requests_session
from delivery.services.outbox import Answer, Outcome, retry_after_seconds

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"


def configured() -> bool:
    return bool(settings.FCM_SERVICE_ACCOUNT_FILE)


@dataclass(frozen=True)
class Message:
    device_token: str
    job_id: str
    title: str
    body: str
    data: dict[str, str]  # jobId, notificationId, jobType, status


class _Account:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._credentials: service_account.Credentials | None = None
        self._project_id = ""
        self._file = ""

    def _load(self) -> service_account.Credentials:
        if self._credentials is None or self._file != settings.FCM_SERVICE_ACCOUNT_FILE:
            info = json.loads(Path(settings.FCM_SERVICE_ACCOUNT_FILE).read_text())
            self._credentials = service_account.Credentials.from_service_account_info(info, scopes=[SCOPE])
            self._project_id = str(info["project_id"])
            self._file = settings.FCM_SERVICE_ACCOUNT_FILE
        return self._credentials

    def token(self, *, instead_of: str = "") -> tuple[str, str]:
        """``(project_id, access token)``: the current token while it is valid, a new
        one when it is about to expire or is ``instead_of`` (the one FCM refused)."""
        with self._lock:
            credentials = self._load()
            if not credentials.valid or (instead_of and credentials.token == instead_of):
                credentials.refresh(Request(session=requests_session()))
            return self._project_id, str(credentials.token)


ACCOUNT = _Account()
CONNECTION = Http2Client("FCM_ENDPOINT")


def _error(response: httpx.Response) -> tuple[str, str, list[dict[str, Any]]]:
    """FCM's error body: ``(status, message, details)``."""
    try:
        error = response.json().get("error", {})
    except (ValueError, AttributeError):
        return "", "", []
    if not isinstance(error, dict):
        return "", "", []
    details = [d for d in error.get("details", []) if isinstance(d, dict)]
    return str(error.get("status", "")), str(error.get("message", ""))[:200], details


def _dead_token(code: int, status: str, message: str, details: list[dict[str, Any]]) -> bool:
    codes = {str(d.get("errorCode", "")) for d in details}
    if code == 404 and "UNREGISTERED" in codes:
        return True
    if code == 400 and status == "INVALID_ARGUMENT":
        fields = {str(v.get("field", "")) for d in details for v in d.get("fieldViolations", []) if isinstance(v, dict)}
        return "message.token" in fields or "token" in message.lower()
    return False


def send(message: Message, *, renewed: Any = None) -> Answer:
    """One push; a ``401`` renews the access token and tries once more."""
    refused = ""
    for last in (False, True):
        try:
            project_id, token = ACCOUNT.token(instead_of=refused)
        except (google.auth.exceptions.TransportError, google.auth.exceptions.RefreshError) as error:
            return Answer(Outcome.RETRY, error=f"FCM's access token not obtained: {type(error).__name__}")
        body = {
            "message": {
                "token": message.device_token,
                "notification": {"title": message.title, "body": message.body},
                "data": message.data,
                "android": {
                    "collapse_key": message.job_id,
                    "priority": "high",
                    "ttl": f"{settings.PUSH_TTL_SECONDS}s",
                },
            }
        }
        url = f"{settings.FCM_ENDPOINT.rstrip('/')}/v1/projects/{project_id}/messages:send"
        try:
            response = CONNECTION.get().post(
                url,
                headers={"authorization": f"Bearer {token}", "content-type": "application/json; charset=utf-8"},
                content=json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
            )
        except httpx.HTTPError as error:
            return Answer(Outcome.RETRY, error=f"FCM not reached: {type(error).__name__}")
        code = response.status_code
        if 200 <= code < 300:
            return Answer(Outcome.DELIVERED, status_code=code)
        if code == 401 and not last:
            refused = token
            if renewed is not None:
                renewed()
            continue
        status, text, details = _error(response)
        error = f"FCM answered {code}" + (f" {status}" if status else "") + (f": {text}" if text else "")
        if _dead_token(code, status, text, details):
            return Answer(Outcome.FAILED, status_code=code, error=error, note="device_disabled")
        if code == 429 or code >= 500:
            return Answer(
                Outcome.RETRY, status_code=code, error=error,
                retry_after=retry_after_seconds(response.headers.get("retry-after")),
            )  # fmt: skip
        return Answer(Outcome.FAILED, status_code=code, error=error)
    raise AssertionError("unreachable")  # pragma: no cover
