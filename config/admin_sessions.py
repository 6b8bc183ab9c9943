"""Operator sessions (contract section 10): a Django admin session (the admin, the
dashboard: whatever logs in with Django's session) ends after
``ADMIN_SESSION_IDLE_MINUTES`` without a request, and ``ADMIN_SESSION_MAX_HOURS`` after
its login whatever happens in between; the next request finds it logged out, and the
admin sends it to its login page.

Only a request that carries a session cookie is looked at, so the APIs' requests cost
nothing more. The last request's time is written at most once a minute (a session
write per page would be a database write per page), so idleness is measured to within
that minute."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse

STARTED = "_operator_session_started"
SEEN = "_operator_session_seen"
SEEN_EVERY_SECONDS = 60


class OperatorSessionMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if settings.SESSION_COOKIE_NAME in request.COOKIES:
            self._expire(request)
        return self.get_response(request)

    def _expire(self, request: HttpRequest) -> None:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return
        session = request.session
        now = time.time()
        started = session.get(STARTED)
        seen = session.get(SEEN)
        if not isinstance(started, int | float):
            started = session[STARTED] = now  # a session from before these rules starts now
        idle = settings.ADMIN_SESSION_IDLE_MINUTES * 60
        longest = settings.ADMIN_SESSION_MAX_HOURS * 3600
        if now - started > longest or (isinstance(seen, int | float) and now - seen > idle):
            logout(request)  # flushes the session; request.user is anonymous from here on
            return
        if not isinstance(seen, int | float) or now - seen >= SEEN_EVERY_SECONDS:
            session[SEEN] = now
