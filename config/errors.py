"""Every error code of the platform, mapped to its HTTP status and retryable flag,
and the one DRF exception handler that renders the contract's error body:

    {"error": {"code": "JOB_NOT_FOUND", "message": "...", "retryable": false}}

Services raise ``DomainError(ErrorCode.X, "message")``; no view builds an error body.
A backing service that cannot be reached (the database, Redis) is ``503
SERVICE_UNAVAILABLE`` with ``Retry-After`` on every endpoint, never a 500: DRF views
through ``exception_handler``, everything else (admin, middleware) through ``handler500``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
from enum import Enum
from typing import Any

import redis
from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import DataError, InterfaceError, OperationalError, connections
from django.http import Http404, HttpRequest, JsonResponse
from django.utils.log import log_response
from rest_framework import exceptions
from rest_framework.response import Response

# What a runtime reports: the framework-free shared module's, re-exported under its old name.
from protocol.errors import RuntimeErrorCode as RuntimeErrorCode

logger = logging.getLogger(__name__)


class ErrorCode(Enum):
    """(HTTP status, retryable). The value is the code itself."""

    # Conventions of every API
    VALIDATION_ERROR = ("VALIDATION_ERROR", 400, False)
    UNAUTHORIZED = ("UNAUTHORIZED", 401, False)
    FORBIDDEN = ("FORBIDDEN", 403, False)
    NOT_FOUND = ("NOT_FOUND", 404, False)
    METHOD_NOT_ALLOWED = ("METHOD_NOT_ALLOWED", 405, False)
    UNSUPPORTED_MEDIA_TYPE = ("UNSUPPORTED_MEDIA_TYPE", 415, False)
    RATE_LIMITED = ("RATE_LIMITED", 429, True)
    # The database or Redis cannot be reached: retry after Retry-After seconds.
    SERVICE_UNAVAILABLE = ("SERVICE_UNAVAILABLE", 503, True)

    # The internal API (runtime <-> API)
    JOB_NOT_FOUND = ("JOB_NOT_FOUND", 404, False)
    JOB_NOT_ACTIVE = ("JOB_NOT_ACTIVE", 409, False)
    JOB_ALREADY_LOCKED = ("JOB_ALREADY_LOCKED", 409, True)
    SNAPSHOT_NOT_FOUND = ("SNAPSHOT_NOT_FOUND", 404, False)
    CREDENTIAL_NOT_FOUND = ("CREDENTIAL_NOT_FOUND", 404, False)
    CREDENTIAL_REQUIRED = ("CREDENTIAL_REQUIRED", 400, False)
    RESULT_ALREADY_EXISTS = ("RESULT_ALREADY_EXISTS", 409, False)
    RESULT_SCHEMA_UNSUPPORTED = ("RESULT_SCHEMA_UNSUPPORTED", 422, False)
    INTERNAL_ERROR = ("INTERNAL_ERROR", 500, True)
    # Beside the runtime's own failure codes: a stored user key that no configured encryption key
    # opens. Retrying cannot help; the runtime reports CREDENTIAL_RESOLVE_FAILED.
    CREDENTIAL_RESOLVE_FAILED = ("CREDENTIAL_RESOLVE_FAILED", 500, False)

    # The user API
    AI_ANALYSIS_DISABLED = ("AI_ANALYSIS_DISABLED", 400, False)
    INVALID_JOB_TYPE = ("INVALID_JOB_TYPE", 400, False)
    INVALID_TARGET_TYPE = ("INVALID_TARGET_TYPE", 400, False)
    DAILY_JOB_LIMIT_EXCEEDED = ("DAILY_JOB_LIMIT_EXCEEDED", 400, False)
    DAILY_TOKEN_BUDGET_EXCEEDED = ("DAILY_TOKEN_BUDGET_EXCEEDED", 400, False)
    PLATFORM_CIRCUIT_OPEN = ("PLATFORM_CIRCUIT_OPEN", 503, True)
    PLATFORM_CIRCUIT_HALF_OPEN = ("PLATFORM_CIRCUIT_HALF_OPEN", 503, True)
    PLATFORM_TOKEN_BUDGET_EXCEEDED = ("PLATFORM_TOKEN_BUDGET_EXCEEDED", 400, False)
    PLATFORM_COST_BUDGET_EXCEEDED = ("PLATFORM_COST_BUDGET_EXCEEDED", 400, False)

    # The learning API: a create past the objects of its kind a user may hold
    # (LEARNING_MAX_OBJECTS_PER_USER); retrying cannot help until some are deleted.
    LEARNING_LIMIT_EXCEEDED = ("LEARNING_LIMIT_EXCEEDED", 409, False)

    # The model-asynch API
    MODEL_NOT_FOUND = ("MODEL_NOT_FOUND", 404, False)
    MODEL_DISABLED = ("MODEL_DISABLED", 409, False)
    QUEUE_LIMIT_EXCEEDED = ("QUEUE_LIMIT_EXCEEDED", 429, True)

    def __init__(self, code: str, http_status: int, retryable: bool) -> None:
        self.code = code
        self.http_status = http_status
        self.retryable = retryable


class DomainError(Exception):
    """A failure a service reports to its caller with one of the contract's codes."""

    def __init__(self, code: ErrorCode, message: str = "", *, fields: dict[str, Any] | None = None) -> None:
        super().__init__(message or code.code)
        self.code = code
        self.message = message or code.code.replace("_", " ").capitalize()
        self.fields = fields

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, fields=self.fields)


def error_body(code: ErrorCode, message: str, *, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code.code, "message": message, "retryable": code.retryable}
    if fields is not None:
        error["fields"] = fields
    return {"error": error}


def _message_of(detail: Any) -> str:
    if isinstance(detail, list | tuple) and detail:
        return _message_of(detail[0])
    if isinstance(detail, dict) and detail:
        return _message_of(next(iter(detail.values())))
    return str(detail)


def _fields_of(detail: Any) -> dict[str, Any]:
    if isinstance(detail, dict):
        return {
            ("nonFieldErrors" if key == "non_field_errors" else key): _flatten(value) for key, value in detail.items()
        }
    return {"nonFieldErrors": _flatten(detail)}


def _flatten(detail: Any) -> Any:
    if isinstance(detail, dict):
        return {key: _flatten(value) for key, value in detail.items()}
    if isinstance(detail, list | tuple):
        return [_flatten(item) for item in detail]
    return str(detail)


_DRF_CODES: list[tuple[type[exceptions.APIException], ErrorCode]] = [
    (exceptions.ValidationError, ErrorCode.VALIDATION_ERROR),
    (exceptions.ParseError, ErrorCode.VALIDATION_ERROR),
    (exceptions.NotAuthenticated, ErrorCode.UNAUTHORIZED),
    (exceptions.AuthenticationFailed, ErrorCode.UNAUTHORIZED),
    (exceptions.PermissionDenied, ErrorCode.FORBIDDEN),
    (exceptions.NotFound, ErrorCode.NOT_FOUND),
    (exceptions.MethodNotAllowed, ErrorCode.METHOD_NOT_ALLOWED),
    (exceptions.UnsupportedMediaType, ErrorCode.UNSUPPORTED_MEDIA_TYPE),
    (exceptions.NotAcceptable, ErrorCode.VALIDATION_ERROR),
    (exceptions.Throttled, ErrorCode.RATE_LIMITED),
]


# What a backing service that is down raises: psycopg's and sqlite's connection and
# server errors reach us as Django's OperationalError / InterfaceError; redis-py
# (also under Django's Redis cache) raises its own. None of them says anything
# about the request, so the answer is "try again", never a 500.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)


def is_outage(exc: BaseException | None) -> bool:
    return isinstance(exc, OUTAGE_ERRORS)


def _drop_broken_connections() -> None:
    """Close every database connection that failed, so the next request reconnects
    instead of reusing a dead socket (``CONN_MAX_AGE``). Redis clients drop theirs."""
    for conn in connections.all(initialized_only=True):
        if conn.errors_occurred and not conn.in_atomic_block:
            with contextlib.suppress(Exception):  # closing a dead connection may fail; it is dropped all the same
                conn.close_if_unusable_or_obsolete()


def service_unavailable_body(exc: BaseException) -> dict[str, Any]:
    what = "database" if isinstance(exc, OperationalError | InterfaceError) else "cache (Redis)"
    logger.warning("Service unavailable, the %s cannot be reached: %s: %s", what, type(exc).__name__, exc)
    _drop_broken_connections()
    return error_body(ErrorCode.SERVICE_UNAVAILABLE, f"The service is unavailable ({what}); retry shortly.")


def retry_after_header() -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(settings.SERVICE_UNAVAILABLE_RETRY_AFTER_SECONDS)))}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every error leaves in the contract's shape.

    A 5xx the contract names (the breaker's ``503``s, an outage's) is an answer the
    caller is told to retry, not a server error: ``django.request`` logs it as a
    warning, as it does a 4xx; only ``500 INTERNAL_ERROR`` is logged as an error."""
    response = _error_response(exc, context)
    request = context.get("request")
    if is_outage(exc):
        response._has_been_logged = True  # type: ignore[attr-defined]  # its one line: service_unavailable_body's
    elif response.status_code > 500 and request is not None:
        log_response(
            "%s: %s", response.reason_phrase, request.path, response=response, request=request, level="warning"
        )
    return response


def _error_response(exc: Exception, context: dict[str, Any]) -> Response:
    if isinstance(exc, DomainError):
        return Response(exc.body(), status=exc.code.http_status)
    if is_outage(exc):
        return Response(service_unavailable_body(exc), status=503, headers=retry_after_header())
    if isinstance(exc, DataError):
        # A value the database refuses (out of range, bad text) that validation let through.
        logger.warning("Database refused a value in %s: %s", type(context.get("view")).__name__, exc)
        exc = exceptions.ValidationError({"nonFieldErrors": ["A value is out of the range the server can store."]})
    elif isinstance(exc, RequestDataTooBig):  # bad input, on every endpoint
        exc = exceptions.ValidationError(
            {"body": [f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."]}
        )
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, exceptions.APIException):
        return _api_exception_response(exc)
    logger.exception("Unhandled error in %s", context.get("view").__class__.__name__ if context.get("view") else "view")
    return Response(error_body(ErrorCode.INTERNAL_ERROR, "Internal server error"), status=500)


def _api_exception_response(exc: exceptions.APIException) -> Response:
    code = next((c for klass, c in _DRF_CODES if isinstance(exc, klass)), None)
    headers: dict[str, str] = {}
    if code is None:  # an APIException no table names: keep its status, say what it is
        body = {
            "error": {"code": str(exc.default_code).upper(), "message": _message_of(exc.detail), "retryable": False}
        }
        return Response(body, status=exc.status_code)
    if isinstance(exc, exceptions.ValidationError):
        body = error_body(code, "Request validation failed: " + _message_of(exc.detail), fields=_fields_of(exc.detail))
    elif code is ErrorCode.VALIDATION_ERROR:
        body = error_body(code, _message_of(exc.detail), fields={})
    else:
        body = error_body(code, _message_of(exc.detail))
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        headers["Retry-After"] = str(max(1, math.ceil(exc.wait)))
    if code is ErrorCode.UNAUTHORIZED:
        headers["WWW-Authenticate"] = 'Bearer realm="api"'
    return Response(body, status=code.http_status, headers=headers)


def json_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    """handler404 for paths outside DRF's views."""
    return JsonResponse(error_body(ErrorCode.NOT_FOUND, "Not found"), status=404)


def json_bad_request(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    """handler400: what Django refuses before any view (a Host not in ALLOWED_HOSTS, a
    malformed multipart body) is bad input, in the contract's body."""
    return JsonResponse(error_body(ErrorCode.VALIDATION_ERROR, "Bad request", fields={}), status=400)


def json_server_error(request: HttpRequest) -> JsonResponse:
    """handler500: the contract's body even when Django itself fails. Django calls it
    while handling the exception, so an outage raised outside DRF (the admin, a
    middleware's session or user lookup) is still a 503."""
    exc = sys.exc_info()[1]
    if is_outage(exc):
        response = JsonResponse(service_unavailable_body(exc), status=503, headers=retry_after_header())
        response._has_been_logged = True  # type: ignore[attr-defined]  # one line: the warning that says why
        return response
    return JsonResponse(error_body(ErrorCode.INTERNAL_ERROR, "Internal server error"), status=500)
