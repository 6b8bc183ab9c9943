"""The pages of no app: the front door (``GET /``) and the answer to a path that is
nothing (contract §1).

``front_door``: a small page naming the API docs, the schema and the admin, or the same
as JSON to a client that asks for JSON.

``not_found``: every path no pattern takes, and every ``Http404`` a page's view raises
(``RejectNulMiddleware.process_exception``), whether ``DEBUG`` is on or off: a mistyped
admin address is an admin page ("Page not found", with the way back), anything else the
contract's JSON ``404 NOT_FOUND``. Django's debug page, which lists every URL pattern, is
never an answer."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.views.decorators.csrf import csrf_exempt

from config.errors import ErrorCode, error_body, json_not_found

LINKS = {"docs": "/api/docs", "schema": "/api/schema", "admin": "/admin/"}


@csrf_exempt  # a POST here is told 405, not a CSRF page
def front_door(request: HttpRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        body = error_body(ErrorCode.METHOD_NOT_ALLOWED, f'Method "{request.method}" not allowed.')
        return JsonResponse(body, status=405, headers={"Allow": "GET, HEAD"})
    if request.get_preferred_type(["text/html", "application/json"]) == "application/json":
        response: HttpResponse = JsonResponse({"name": settings.SPECTACULAR_SETTINGS["TITLE"], **LINKS})
    else:
        context = {"name": settings.SPECTACULAR_SETTINGS["TITLE"], "links": LINKS}
        response = TemplateResponse(request, "front_door.html", context)
        # Nothing to run and nothing to fetch but this origin's stylesheet.
        response["Content-Security-Policy"] = "default-src 'none'; style-src 'self'; img-src 'self'"
    response["Vary"] = "Accept"
    return response


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/admin/"):
        context = {**admin.site.each_context(request), "request_path": request.path}
        return TemplateResponse(request, "admin/404.html", context, status=404)
    return json_not_found(request, exception)


@csrf_exempt  # any method at a path that is nothing is a 404, not a CSRF page
def no_such_path(request: HttpRequest, **kwargs: str) -> HttpResponse:
    """The last URL pattern: Django never looks for a pattern in vain, so never shows the
    patterns it tried."""
    return not_found(request)
