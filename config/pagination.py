"""Lists as the contract has them: ``{"results": [...], "next": "<cursor or null>"}``,
``?cursor=`` to follow, ``?limit=`` (default 20, at most 100), newest first."""

from __future__ import annotations

from typing import Any
from urllib import parse

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response

# ?cursor= and ?limit= as the schema documents them (the bounds get_page_size enforces).
_PAGE_QUERY = (
    ("cursor", "The `next` of the previous page", {"type": "string"}),
    ("limit", "1 to 100 (default 20)", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}),
)


class ContractCursorPagination(CursorPagination):
    page_size = 20
    max_page_size = 100
    page_size_query_param = "limit"
    ordering = ("-created_at", "-id")

    def get_page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        try:
            size = int(raw)
        except ValueError:
            raise ValidationError({"limit": ["A whole number from 1 to 100."]}) from None
        if not 1 <= size <= self.max_page_size:
            raise ValidationError({"limit": ["A whole number from 1 to 100."]})
        return size

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> list[Any] | None:
        # A cursor whose position is not a value of the ordering field fails only
        # when the query is built: bad input, not a server error.
        try:
            return super().paginate_queryset(queryset, request, view)
        except (DjangoValidationError, ValueError, TypeError, OverflowError):
            raise ValidationError({"cursor": ["Invalid cursor."]}) from None

    def decode_cursor(self, request: Request) -> Cursor | None:
        try:
            return super().decode_cursor(request)
        except Exception:
            raise ValidationError({"cursor": ["Invalid cursor."]}) from None

    def encode_cursor(self, cursor: Cursor) -> str:
        # The opaque token alone, not a URL: clients pass it back as ?cursor=.
        url = super().encode_cursor(cursor)
        return parse.parse_qs(parse.urlsplit(url).query)[self.cursor_query_param][0]

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"results": data, "next": self.get_next_link()})

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {"name": name, "required": False, "in": "query", "description": description, "schema": dict(schema)}
            for name, description, schema in _PAGE_QUERY
        ]

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["results", "next"],
            "properties": {"results": schema, "next": {"type": "string", "nullable": True}},
        }


def page_of(serializer_class: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """The envelope a list answers with (``{"results", "next"}``), for the schema of a
    view that paginates by hand: ``Paginated<Name>List``, as drf-spectacular names
    the pages of the lists it paginates itself."""
    name = serializer_class.__name__.removesuffix("Serializer")
    return type(
        f"Paginated{name}ListSerializer",
        (serializers.Serializer,),
        {
            "results": serializer_class(many=True),
            "next": serializers.CharField(allow_null=True, help_text="The cursor of the next page; null on the last"),
            "__module__": serializer_class.__module__,
        },
    )


# The query parameters of a list a view paginates by hand (the generic views' are automatic).
PAGE_PARAMETERS = [
    OpenApiParameter(name, dict(schema), description=description) for name, description, schema in _PAGE_QUERY
]
