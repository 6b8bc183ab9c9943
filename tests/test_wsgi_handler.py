"""The WSGI handler (``config.handlers``): the JSON APIs' requests skip the middleware
that serves only a browser, every other path runs the whole ``MIDDLEWARE``; what every
answer carries (request id, ``nosniff``) and the NUL check stay on both. Driven through
``config.wsgi.application``, the object gunicorn serves."""

from __future__ import annotations

import io
import sys

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver

from config.handlers import API_PREFIXES, BROWSER_ONLY_MIDDLEWARE, api_middleware, is_api

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def _call(path: str, query: str = "", method: str = "GET") -> tuple[int, dict[str, list[str]]]:
    from config.wsgi import application

    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_LENGTH": "0",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
    }
    answer: dict[str, object] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: object = None) -> None:
        answer["status"] = int(status.split()[0])
        answer["headers"] = headers

    body = application(environ, start_response)
    b"".join(body)
    body.close()
    headers: dict[str, list[str]] = {}
    for name, value in answer["headers"]:  # type: ignore[union-attr]
        headers.setdefault(name.lower(), []).append(value)
    return answer["status"], headers  # type: ignore[return-value]


def test_the_api_chain_is_middleware_without_what_only_a_browser_needs_in_the_same_order():
    assert set(settings.MIDDLEWARE) >= BROWSER_ONLY_MIDDLEWARE  # a renamed entry would be kept silently
    assert api_middleware() == [path for path in settings.MIDDLEWARE if path not in BROWSER_ONLY_MIDDLEWARE]
    for kept in (
        "config.observability.middleware.ObservabilityMiddleware",
        "django.middleware.security.SecurityMiddleware",
        "config.middleware.RejectNulMiddleware",
    ):
        assert kept in api_middleware()


def test_an_api_answer_has_its_request_id_and_nosniff_and_no_browser_headers():
    status, headers = _call("/healthz")
    assert status == 200
    assert headers["x-content-type-options"] == ["nosniff"] and headers["x-request-id"]
    assert "x-frame-options" not in headers and "set-cookie" not in headers
    status, headers = _call("/ai/jobs")  # no token: the API's own 401, still without a frame header
    assert status == 401 and "x-frame-options" not in headers and headers["x-request-id"]


def test_the_api_chain_still_refuses_nul_characters():
    status, headers = _call("/ai/jobs", "status=%00")
    assert status == 400 and headers["x-content-type-options"] == ["nosniff"]


def test_every_other_path_runs_the_whole_chain():
    status, headers = _call("/admin/login/")
    assert status == 200
    assert headers["x-frame-options"] == ["DENY"]
    assert "content-security-policy" in headers
    assert any("csrftoken=" in cookie for cookie in headers["set-cookie"])  # the CSRF middleware ran
    status, headers = _call("/no-such-page")  # not an API's path: the whole chain, even for a 404
    assert status == 404 and headers["x-frame-options"] == ["DENY"]


def _routes(patterns: list, prefix: str = "") -> list[str]:  # type: ignore[type-arg]
    found = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found += _routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            found.append(route)
    return found


def test_every_url_but_the_admin_and_the_api_docs_is_an_api_path():
    pages = ("admin/", "api/docs", "api/schema")
    for route in _routes(get_resolver().url_patterns):
        if not route.startswith(pages) and route not in ("", "^$"):
            assert is_api("/" + route), f"/{route} is outside API_PREFIXES {API_PREFIXES}"
