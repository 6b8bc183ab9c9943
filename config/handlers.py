"""The WSGI handler: the JSON APIs' requests pass only the middleware that concerns them.

``MIDDLEWARE`` is the chain of every path (the admin, the API docs, anything added
later). Of it, the middleware that serves only a browser (the session, its CSRF cookie,
``request.user`` from the session, flash messages, ``X-Frame-Options``, the pages'
``Content-Security-Policy``, static files) has nothing to do on the JSON APIs' paths
(``API_PREFIXES``): their callers send a token or key with each request, DRF's views
are exempt from CSRF, and nothing there reads a session, renders a frame or is a file.
Those requests go through a second chain, built once per process from the same list
without that middleware (``BROWSER_ONLY_MIDDLEWARE``); the request id, the metrics,
``SecurityMiddleware``, the NUL check, ``CommonMiddleware`` and the admin login's lockout
stay on both. ``settings.MIDDLEWARE`` itself is unchanged, so Django's deploy checks
still see the middleware they look for."""

from __future__ import annotations

from django.conf import settings
from django.core.handlers.base import BaseHandler
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest
from django.http.response import HttpResponseBase

# The JSON APIs' paths (their URLs in config/urls.py).
API_PREFIXES = (
    "/ai/",
    "/internal/",
    "/learning/",
    "/auth/",
    "/task/",
    "/model/",
    "/webhook/",
    "/healthz",
    "/readyz",
    "/metrics",
)

BROWSER_ONLY_MIDDLEWARE = frozenset(
    {
        "whitenoise.middleware.WhiteNoiseMiddleware",
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "config.admin_sessions.OperatorSessionMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
        "config.middleware.PagesCSPMiddleware",
    }
)


def is_api(path: str) -> bool:
    return path.startswith(API_PREFIXES)


def api_middleware() -> list[str]:
    """``MIDDLEWARE`` without what only a browser needs, in the same order."""
    return [path for path in settings.MIDDLEWARE if path not in BROWSER_ONLY_MIDDLEWARE]


class ApiHandler(BaseHandler):
    """The JSON APIs' chain: Django's own, loaded from ``api_middleware()``."""

    def load_middleware(self, is_async: bool = False) -> None:
        # Django's loader reads settings.MIDDLEWARE: given the API's list for this one
        # call, at process start, before any request is served.
        every_path = settings.MIDDLEWARE
        settings.MIDDLEWARE = api_middleware()
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = every_path


class ProjectWSGIHandler(WSGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self.api = ApiHandler()
        self.api.load_middleware()

    def get_response(self, request: HttpRequest) -> HttpResponseBase:
        if is_api(request.path_info):
            return self.api.get_response(request)
        return super().get_response(request)
