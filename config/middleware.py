"""Middleware of the project's own.

``RejectNulMiddleware``: bad input that never reaches a view, a NUL character in the
path or the query string. PostgreSQL cannot compare text with NUL, so without this any
lookup by such an id or filter would end in a database error instead of a
400 ``VALIDATION_ERROR``. And a path that is nothing, found so by a page's view
(``process_exception``): ``config.pages``' 404, ``DEBUG`` or not.

``PagesCSPMiddleware``: the ``Content-Security-Policy`` of the pages a browser shows
(``CONTENT_SECURITY_POLICY``: scripts, styles and everything else from this origin
only), django-csp's middleware on the admin's pages and the API docs, and not a step
more on the JSON APIs, which no browser renders."""

from __future__ import annotations

from collections.abc import Callable

from csp.middleware import CSPMiddleware
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase

from config import pages
from config.errors import ErrorCode, error_body

PAGE_PREFIXES = ("/admin/", "/api/docs")


class RejectNulMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path:
            return JsonResponse(error_body(ErrorCode.NOT_FOUND, "Not found"), status=404)
        bad = {
            key.replace("\x00", "\\x00"): ["Must not contain NUL characters."]
            for key, values in request.GET.lists()
            if "\x00" in key or any("\x00" in v for v in values)
        }
        if bad:  # each bad query parameter is named
            return JsonResponse(
                error_body(
                    ErrorCode.VALIDATION_ERROR,
                    f"Request validation failed: NUL characters in {', '.join(sorted(bad))}",
                    fields=bad,
                ),
                status=400,
            )
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """A page's view that raised ``Http404`` (an API view answers its own): the 404 of
        ``config.pages``, not Django's debug page of URL patterns when ``DEBUG`` is on.
        Called only when a view raises, so it costs the other requests nothing."""
        return pages.not_found(request, exception) if isinstance(exception, Http404) else None


class PagesCSPMiddleware(CSPMiddleware):
    async_capable = False  # the project is served over WSGI; __call__ below is sync

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.path_info.startswith(PAGE_PREFIXES):
            return super().__call__(request)
        return self.get_response(request)  # one test and a call: the APIs' whole cost
