"""The OpenAPI schema tells the truth: every operation documents the
errors it can answer, with the platform's error body and their codes
(``ContractAutoSchema``, the project's DEFAULT_SCHEMA_CLASS; the view is ``config.schema``'s).

Each operation gets, besides its success:

- ``400 VALIDATION_ERROR``: any request can be bad input (a query parameter, a NUL in
  the query, an ``Accept`` the server cannot serve, a body too large);
- ``401 UNAUTHORIZED`` where the view needs a caller, ``429 RATE_LIMITED`` (with
  ``Retry-After``) where it is throttled, ``415`` where it takes a body, ``404
  NOT_FOUND`` where its path names an object;
- ``503 SERVICE_UNAVAILABLE`` (with ``Retry-After``): a backing service is down;
- the domain codes its handler declares with ``@raises(ErrorCode.X, ...)`` (or its view
  in ``error_codes``, a tuple or a dict by method), each under the HTTP status
  ``config.errors`` gives it.

A status is documented once, with the enum of every code it can carry; a status the
view documents itself (a readiness body on ``503``) is left as the view has it.

And what a generated client builds its calls and types from:

- a ``PATCH`` body has no ``default``: a partial update applies none (DRF skips a
  field's default when the serializer is partial), so a client must not send one;
- an operation anyone may call has ``security: []`` (not ``[{}]``, nor nothing);
- ``ChoiceString``: a field rendered as the plain string it is stored as, documented as
  the enum of its choices (the same component as the queries' enum of those choices),
  so a client has a union to switch on."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent, build_choice_field, is_patched_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny

from config.errors import ErrorCode, error_body

F = TypeVar("F", bound=Callable[..., Any])

ERROR_COMPONENT = "Error"
_RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait before trying again"}}
_BODY_METHODS = {"POST", "PUT", "PATCH"}

# When each code comes, in one sentence: the "Errors" list of every operation's description
# and the message of each documented example. tests/test_schema_reference.py holds that every
# ErrorCode has one.
ERROR_WHEN: dict[str, str] = {
    "VALIDATION_ERROR": "The request is malformed or a value is out of bounds; `fields` names each bad field "
    "(a query parameter, a header, the body as a whole).",
    "UNAUTHORIZED": "No credentials, or credentials that are wrong, expired or revoked.",
    "FORBIDDEN": "Authenticated, but this caller may not do this.",
    "NOT_FOUND": "No such object, or another owner's object (which answers exactly as a missing one).",
    "METHOD_NOT_ALLOWED": "The path exists, the method does not.",
    "UNSUPPORTED_MEDIA_TYPE": "A body that is not `application/json`.",
    "RATE_LIMITED": "A throttle refused the call; wait `Retry-After` seconds.",
    "SERVICE_UNAVAILABLE": "A backing service the request needs (the database, Redis) cannot be reached; "
    "retry after `Retry-After` seconds.",
    "JOB_NOT_FOUND": "No job with that id (or not the caller's).",
    "JOB_NOT_ACTIVE": "The job is not the caller's to act on now: final, not locked by this instance, its lease "
    "lapsed, another attempt, or its cancel requested (the message says which).",
    "JOB_ALREADY_LOCKED": "Another runtime instance holds the job's lock; it may come back.",
    "SNAPSHOT_NOT_FOUND": "The job's snapshot is missing.",
    "CREDENTIAL_NOT_FOUND": "No such credential of the caller's, or it was deleted.",
    "CREDENTIAL_REQUIRED": "`apiKeyMode` is `user_deepseek_key` and no `credentialId` was sent.",
    "RESULT_ALREADY_EXISTS": "A different output for a job that already succeeded.",
    "RESULT_SCHEMA_UNSUPPORTED": "An unknown `outputSchemaVersion`, or an output that misses its schema.",
    "INTERNAL_ERROR": "An unexpected failure of the server, logged with its traceback.",
    "CREDENTIAL_RESOLVE_FAILED": "The credential cannot be resolved (missing, deleted, or a stored key no "
    "configured encryption key opens); retrying cannot help.",
    "AI_ANALYSIS_DISABLED": "The learner has not turned AI analysis on (their consent, `PATCH /ai/settings`).",
    "INVALID_JOB_TYPE": "`jobType` is not a registered job type.",
    "INVALID_TARGET_TYPE": "`targetType` is not one the job type takes.",
    "DAILY_JOB_LIMIT_EXCEEDED": "The learner's jobs for today, in that key mode, are used up (until their local "
    "midnight).",
    "DAILY_TOKEN_BUDGET_EXCEEDED": "The learner's tokens for today, in that key mode, are used up (until their "
    "local midnight).",
    "PLATFORM_CIRCUIT_OPEN": "The platform key's circuit breaker is open; retry later.",
    "PLATFORM_CIRCUIT_HALF_OPEN": "The platform key's breaker is half-open and its trial jobs are taken; retry later.",
    "PLATFORM_TOKEN_BUDGET_EXCEEDED": "The platform key's token budget for today is spent.",
    "PLATFORM_COST_BUDGET_EXCEEDED": "The platform key's cost budget for today is spent.",
    "LEARNING_LIMIT_EXCEEDED": "The learner holds the most objects of this kind they may "
    "(`LEARNING_MAX_OBJECTS_PER_USER`); delete some first.",
    "MODEL_NOT_FOUND": "No model config of that `modelName`.",
    "MODEL_DISABLED": "The model config is disabled.",
    "QUEUE_LIMIT_EXCEEDED": "The model's queue already holds `queueLimit` queued tasks; retry later.",
}


def raises(*codes: ErrorCode) -> Callable[[F], F]:
    """Declare the domain codes a view's handler can answer (besides the ones every
    operation of its kind can: see the module's docstring)."""

    def mark(handler: F) -> F:
        handler.error_codes = (*getattr(handler, "error_codes", ()), *codes)  # type: ignore[attr-defined]
        return handler

    return mark


def error_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "retryable"],
                "properties": {
                    "code": {
                        "type": "string",
                        "enum": sorted(code.code for code in ErrorCode),
                        "description": "What went wrong; it decides the HTTP status.",
                    },
                    "message": {"type": "string", "description": "What went wrong, for people."},
                    "retryable": {
                        "type": "boolean",
                        "description": "Whether the same request may succeed later (one value per code).",
                    },
                    "fields": {
                        "type": "object",
                        "additionalProperties": {},
                        "description": "VALIDATION_ERROR: each bad field (or query parameter, or header) with its problems",
                    },
                },
            }
        },
    }


Choices = list[tuple[str, str]] | list[str]


class ChoiceString(serializers.CharField):
    """A response field that is one of ``choices`` (or of what the callable ``choices``
    returns when the schema is built: a registry's names). It renders as a CharField
    does, with no lookup in the choices on the runtime API's hot paths; the schema
    documents it as their enum."""

    def __init__(self, choices: Choices | Callable[[], Choices], **kwargs: Any) -> None:
        self.enum_choices = choices
        super().__init__(**kwargs)


class ChoiceStringScheme(OpenApiSerializerFieldExtension):
    target_class = ChoiceString

    def map_serializer_field(self, auto_schema: AutoSchema, direction: str) -> dict[str, Any]:
        field: ChoiceString = self.target
        choices = field.enum_choices() if callable(field.enum_choices) else field.enum_choices
        return build_choice_field(serializers.ChoiceField(choices=choices, allow_null=field.allow_null))


class ContractAutoSchema(AutoSchema):
    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        if not any(operation.get("security") or [{}]):  # no scheme applies: anyone may call it
            operation["security"] = []
        component = ResolvedComponent(
            name=ERROR_COMPONENT, type=ResolvedComponent.SCHEMA, object=ERROR_COMPONENT, schema=error_schema()
        )
        self.registry.register_on_missing(component)
        by_status: dict[int, list[ErrorCode]] = {}
        for code in dict.fromkeys(self.error_codes()):
            by_status.setdefault(code.http_status, []).append(code)
        responses = operation.setdefault("responses", {})
        for status, codes in sorted(by_status.items()):
            codes.sort(key=lambda code: code.code)
            if str(status) in responses:
                continue
            responses[str(status)] = self._error_response(status, codes, component.ref)
        _describe(operation, by_status)
        return operation

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        schema = super()._map_basic_serializer(serializer, direction)
        patched = is_patched_serializer(serializer, direction)
        for field in schema.get("properties", {}).values():
            if "default" not in field or direction != "request":
                continue
            # A default is the server's: a field with one is optional to the client (openapi-typescript
            # would make it required), and DRF applies none on a partial update (a client sending one
            # would overwrite what it never meant to change). The description says it.
            default = field.pop("default")
            if not patched:
                said = f"Default when left out: `{json.dumps(default, default=str)}`."
                field["description"] = f"{field['description']} {said}" if field.get("description") else said
        return schema

    def error_codes(self) -> list[ErrorCode]:
        view = self.view
        codes = [ErrorCode.VALIDATION_ERROR, ErrorCode.SERVICE_UNAVAILABLE]
        permissions = getattr(view, "permission_classes", [])
        if any(permission is not AllowAny for permission in permissions):
            codes.append(ErrorCode.UNAUTHORIZED)
        if getattr(view, "throttle_classes", []):
            codes.append(ErrorCode.RATE_LIMITED)
        if self.method in _BODY_METHODS:
            codes.append(ErrorCode.UNSUPPORTED_MEDIA_TYPE)
        if "{" in self.path:
            codes.append(ErrorCode.NOT_FOUND)
        handler = getattr(view, self.method.lower(), None)
        codes += getattr(handler, "error_codes", ())
        declared = getattr(view, "error_codes", ())  # a view's own, for all methods or by method
        codes += declared.get(self.method.lower(), ()) if isinstance(declared, dict) else declared
        return codes

    def _error_response(self, status: int, codes: list[ErrorCode], ref: dict[str, str]) -> dict[str, Any]:
        names = [code.code for code in codes]
        narrowed = {
            "type": "object",
            "properties": {"error": {"type": "object", "properties": {"code": {"type": "string", "enum": names}}}},
        }
        response: dict[str, Any] = {
            "description": ", ".join(names),
            "content": {
                "application/json": {
                    "schema": {"allOf": [ref, narrowed]},
                    "examples": {code.code: error_example(code) for code in codes},
                }
            },
        }
        if status in (429, 503):
            response["headers"] = _RETRY_AFTER
        return response


def error_example(code: ErrorCode) -> dict[str, Any]:
    """One documented answer of ``code``: its own ``retryable``, and what it means as the message."""
    body = error_body(code, ERROR_WHEN[code.code], fields={} if code is ErrorCode.VALIDATION_ERROR else None)
    return {"summary": f"{code.http_status} {code.code}", "value": body}


def _describe(operation: dict[str, Any], by_status: dict[int, list[ErrorCode]]) -> None:
    """The summary (the description's first sentence, unless the view gave one) and, after
    what the operation does, when each of its documented errors comes."""
    description = (operation.get("description") or "").strip()
    if description and not operation.get("summary"):
        paragraph = " ".join(description.split("\n\n", 1)[0].split())
        first = re.split(r"(?<=\.)\s", paragraph, maxsplit=1)[0].rstrip(".")
        operation["summary"] = first if len(first) <= 120 else first[:117].rstrip() + "..."
    errors = [f"- `{status} {code.code}`: {ERROR_WHEN[code.code]}" for status, codes in sorted(by_status.items())
              for code in codes]  # fmt: skip
    operation["description"] = "\n\n".join(part for part in (description, "**Errors**", "\n".join(errors)) if part)
