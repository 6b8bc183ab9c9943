"""First in the middleware chain: the request's id and its two metrics, and
``X-Content-Type-Options: nosniff`` on every answer (nothing is served as a page).

``X-Request-ID``: the caller's when well formed (1 to 128 characters of
``A-Z a-z 0-9 . _ : -``, which covers UUIDs, ULIDs and most tracing ids, and
nothing that could break a log line or a header), else a new one. It is on the
response and, through the log context, on every log line the request causes."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.log import log_response

from config.observability import context
from config.observability.metrics import HTTP_DURATION, HTTP_REQUESTS

REQUEST_ID_HEADER = "X-Request-ID"
_WELL_FORMED = re.compile(r"[A-Za-z0-9._:\-]{1,128}")

# The ``api`` label of the request metrics, by the path's first segment.
_API_OF = {
    "internal": "internal",
    "ai": "user",
    "learning": "user",
    "model": "asynch",
    "task": "asynch",
    "webhook": "asynch",
    "auth": "auth",
    "admin": "admin",
}


def api_of(path: str) -> str:
    return _API_OF.get(path[1:].partition("/")[0], "other")


def request_id_of(request: HttpRequest) -> str:
    given = request.META.get("HTTP_X_REQUEST_ID", "")
    return given if given and _WELL_FORMED.fullmatch(given) else os.urandom(16).hex()


class ObservabilityMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        request_id = request_id_of(request)
        request.request_id = request_id  # type: ignore[attr-defined]
        token = context.open_context(requestId=request_id)
        try:
            response = self.get_response(request)
            if response.status_code >= 500:
                # Django's own line for a server error, written here, inside the request's
                # context (Django writes it after the middleware returns, outside it).
                log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request)
            elif response.status_code >= 400:
                # A refused request's one line is the server's access line (a warning, with the
                # request id: config/observability/gunicorn.py); Django's would say it twice.
                response._has_been_logged = True  # type: ignore[attr-defined]
        finally:
            context.close_context(token)
        response[REQUEST_ID_HEADER] = request_id
        # SecurityMiddleware says it too, but not on an answer made when it failed itself
        # (a refused Host with SECURE_SSL_REDIRECT): here, outermost, every answer has it.
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        api = api_of(request.path_info)
        HTTP_REQUESTS.inc(api, str(response.status_code))
        HTTP_DURATION.observe(time.perf_counter() - started, api)
        return response

    def process_view(self, request: HttpRequest, view_func: object, view_args: object, view_kwargs: dict) -> None:
        """What the request concerns, for its log lines: the job or task in its path
        or query, and the runtime instance that calls."""
        job_id = view_kwargs.get("job_id")
        task_id = view_kwargs.get("task_id") or (
            request.GET.get("taskId") if request.path_info.startswith("/task/") else None
        )
        instance_id = request.META.get("HTTP_X_RUNTIME_INSTANCE_ID")
        context.bind(
            jobId=job_id if isinstance(job_id, str) and _WELL_FORMED.fullmatch(job_id) else None,
            taskId=task_id if isinstance(task_id, str) and _WELL_FORMED.fullmatch(task_id) else None,
            runtimeInstanceId=instance_id if instance_id and _WELL_FORMED.fullmatch(instance_id) else None,
        )
