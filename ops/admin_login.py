"""Password guessing at ``/admin/login/`` (docs/operations/security.md), with django-axes.

After ``ADMIN_LOGIN_FAILURE_LIMIT`` failed logins for one username from one address,
that pair is refused for ``ADMIN_LOGIN_COOLOFF_MINUTES``, the right password
included, with a page saying so (``429``). The lock is keyed on the pair, so a
guesser locks out no one but themselves: the same account from another address, and
other accounts from theirs, still log in. What this module gives axes:

- the address, as the API's throttles read it: ``REMOTE_ADDR``, or the one
  ``NUM_PROXIES`` trusted proxies put in ``X-Forwarded-For``;
- the username as login reads it (Unicode NFKC, no surrounding whitespace), in any
  case: ``" Root"`` and ``"ROOT"`` are guesses at ``root``;
- a handler that counts and logs only the admin site's logins (the JWT logins of
  ``/auth/*`` have throttles of their own), and a backend that asks nothing of a
  login without a request (a command's, or a test client's ``login()``);
- the refusal page, in the admin's look;
- retention: attempts past the cool-off and access logs past
  ``ADMIN_LOGIN_LOG_RETENTION`` go with ``prune_data``."""

from __future__ import annotations

import datetime as dt
import ipaddress
import math
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.handlers.database import AxesDatabaseHandler
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.conf import settings
from django.contrib import admin
from django.db.models import Max, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from rest_framework.throttling import BaseThrottle

from accounts.usernames import username_key
from config.retention import Sweep

ADMIN_LOGIN_LOG_RETENTION = dt.timedelta(days=90)
_THROTTLE = BaseThrottle()  # only for its get_ident: the API throttles' reading of the address


def cooloff() -> dt.timedelta:
    return dt.timedelta(minutes=settings.ADMIN_LOGIN_COOLOFF_MINUTES)


def normalized_username(name: str) -> str:
    # The key registration, login and the API's throttle compare (accounts.usernames),
    # cut to axes' column.
    return username_key(name)[:255]


def login_username(request: HttpRequest, credentials: dict[str, Any] | None) -> str | None:
    """``AXES_USERNAME_CALLABLE``: the username a login was tried for, normalized."""
    name = (credentials or {}).get("username")
    if name is None:
        name = getattr(request, "data", request.POST).get("username")
    return None if name is None else normalized_username(str(name))


def client_address(request: HttpRequest) -> str | None:
    """``AXES_CLIENT_IP_CALLABLE``: the client's address as the throttles see it, if it
    is one (an address column takes nothing else)."""
    for candidate in (_THROTTLE.get_ident(request), request.META.get("REMOTE_ADDR")):
        try:
            return str(ipaddress.ip_address((candidate or "").strip()))
        except ValueError:
            continue
    return None


class AdminLoginLockoutBackend(AxesStandaloneBackend):
    """First of ``AUTHENTICATION_BACKENDS``: refuses a locked pair before any password is
    hashed. A login without a request is no login form's, and is left to the others."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> None:
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)


class AdminLoginHandler(AxesDatabaseHandler):
    """``AXES_HANDLER``: axes' database handler, for the admin site's logins only."""

    def user_login_failed(self, sender: Any, credentials: dict, request: Any = None, **kwargs: Any) -> None:
        if request is not None and self.is_admin_request(request):
            super().user_login_failed(sender, credentials, request, **kwargs)

    def user_logged_in(self, sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
        if request is not None and self.is_admin_request(request):
            super().user_logged_in(sender, request, user, **kwargs)

    def user_logged_out(self, sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
        if request is not None and self.is_admin_request(request):
            super().user_logged_out(sender, request, user, **kwargs)


def lockout_response(request: HttpRequest, original_response: Any, credentials: dict[str, Any] | None) -> HttpResponse:
    """``AXES_LOCKOUT_CALLABLE``: the refusal, ``429`` with ``Retry-After``, in the admin's look."""
    now = timezone.now()
    last = AccessAttempt.objects.filter(
        username=login_username(request, credentials), ip_address=getattr(request, "axes_ip_address", None)
    ).aggregate(last=Max("attempt_time"))["last"]
    until = (last or now) + cooloff()
    context = {
        **admin.site.each_context(request),
        "title": "Too many failed logins",
        "failure_limit": settings.ADMIN_LOGIN_FAILURE_LIMIT,
        "cooloff_minutes": settings.ADMIN_LOGIN_COOLOFF_MINUTES,
        "until": until,
    }
    response = render(request, "admin/login_locked.html", context, status=429)
    response["Retry-After"] = str(max(1, math.ceil((until - now).total_seconds())))
    return response


# --- retention ------------------------------------------------------------------------------


def attempts_due(now: dt.datetime) -> QuerySet[AccessAttempt]:
    """Failures older than the cool-off no longer count towards a lock."""
    return AccessAttempt.objects.filter(attempt_time__lt=now - cooloff())


def logs_due(now: dt.datetime) -> QuerySet[AccessLog]:
    return AccessLog.objects.filter(attempt_time__lt=now - ADMIN_LOGIN_LOG_RETENTION)


def failure_logs_due(now: dt.datetime) -> QuerySet[AccessFailureLog]:
    return AccessFailureLog.objects.filter(attempt_time__lt=now - ADMIN_LOGIN_LOG_RETENTION)


def login_attempts_clean_expired() -> int:
    """Delete the failures that no longer count towards a lock; how many went."""
    deleted, _ = attempts_due(timezone.now()).delete()
    return deleted


# Small tables (a row per admin login, per failing username and address): read without an index.
ATTEMPTS = Sweep(kind="adminLoginAttempts", due=attempts_due, order_by="attempt_time")
LOGS = Sweep(kind="adminLoginLogs", due=logs_due, order_by="attempt_time")
FAILURE_LOGS = Sweep(kind="adminLoginFailures", due=failure_logs_due, order_by="attempt_time")
SWEEPS = [ATTEMPTS, LOGS, FAILURE_LOGS]
