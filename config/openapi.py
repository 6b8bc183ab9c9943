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

from collections.abc import Callable
from typing import Any, TypeVar

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent, build_choice_field, is_patched_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny

from config.errors import ErrorCode

F = TypeVar("F", bound=Callable[..., Any])

ERROR_COMPONENT = "Error"
_RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait before trying again"}}
_BODY_METHODS = {"POST", "PUT", "PATCH"}


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
                    "code": {"type": "string", "enum": sorted(code.code for code in ErrorCode)},
                    "message": {"type": "string"},
                    "retryable": {"type": "boolean"},
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
        by_status: dict[int, set[str]] = {}
        for code in self.error_codes():
            by_status.setdefault(code.http_status, set()).add(code.code)
        responses = operation.setdefault("responses", {})
        for status, codes in sorted(by_status.items()):
            if str(status) in responses:
                continue
            responses[str(status)] = self._error_response(status, sorted(codes), component.ref)
        return operation

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        schema = super()._map_basic_serializer(serializer, direction)
        if is_patched_serializer(serializer, direction):
            # DRF applies no default on a partial update: a client sending one would
            # overwrite what it never meant to change.
            for field in schema.get("properties", {}).values():
                field.pop("default", None)
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

    def _error_response(self, status: int, codes: list[str], ref: dict[str, str]) -> dict[str, Any]:
        narrowed = {
            "type": "object",
            "properties": {"error": {"type": "object", "properties": {"code": {"type": "string", "enum": codes}}}},
        }
        response: dict[str, Any] = {
            "description": ", ".join(codes),
            "content": {"application/json": {"schema": {"allOf": [ref, narrowed]}}},
        }
        if status in (429, 503):
            response["headers"] = _RETRY_AFTER
        return response
