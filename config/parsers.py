"""The JSON every endpoint accepts: what PostgreSQL can store and a response can
render, nested no deeper than ``config.jsondepth.MAX_DEPTH``. A NUL character or a
lone surrogate (``"\\ud800"``) anywhere in a key or a string, or a body nested too
deep (``"[" * 50000``), is refused at the door as a 400, instead of failing later in
the database, the renderer or a recursive validator, once the row may already be
written. Django admin's JSON fields take the same rules (``StorableJSONFormField``).
"""

from __future__ import annotations

import codecs
import sys
from collections.abc import Callable
from typing import Any

from django import forms
from django.core.exceptions import ValidationError as FormValidationError
from django.forms.fields import InvalidJSONInput
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.utils import json

from config import jsondepth


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "Text must not contain NUL characters."
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "Text must be valid Unicode (no lone surrogates)."
    return None


def unstorable_text(value: Any) -> str | None:
    """Why ``value`` (parsed JSON) cannot be stored, or None."""
    strings: list[str] = []
    jsondepth.too_deep(value, limit=sys.maxsize, strings=strings)
    return _text_problem("".join(strings))


def _too_deep_below_the_top(value: Any) -> str | None:
    return jsondepth.TOO_DEEP if jsondepth.too_deep(value, limit=jsondepth.MAX_DEPTH - 1) else None


class StorableJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        encoding = get_encoding(parser_context or {})
        try:
            text = codecs.getreader(encoding)(stream).read()
            data = json.loads(text, parse_constant=json.strict_constant if self.strict else None)
        except RecursionError:  # deeper than the interpreter's stack: far past MAX_DEPTH
            raise ParseError(f"JSON parse error - {jsondepth.TOO_DEEP}") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        # One walk over the body for its depth, collecting its text, checked at once.
        strings: list[str] = []
        if jsondepth.too_deep(data, strings=strings):
            _refuse(data, jsondepth.TOO_DEEP, _too_deep_below_the_top)
        problem = _text_problem("".join(strings))
        if problem:
            _refuse(data, problem, unstorable_text)
        return data


def _refuse(data: Any, problem: str, problem_of: Callable[[Any], str | None]) -> None:
    """The 400, naming the top-level field the problem is in when the body is an object."""
    if isinstance(data, dict):
        for key, value in data.items():
            found = _text_problem(key) or problem_of(value)
            if found:
                raise ValidationError({key.encode("utf-8", "replace").decode(): [found]})
    raise ParseError(f"JSON parse error - {problem}")


class StorableJSONFormField(forms.JSONField):
    """Django's JSON form field (an admin page's JSON), refusing what the API's parser
    refuses: JSON too deep, or deeper than the interpreter's stack, and a NUL or lone
    surrogate in any string, each a form error on the field instead of a 500."""

    def to_python(self, value: Any) -> Any:
        try:
            converted = super().to_python(value)
        except RecursionError:
            raise FormValidationError(jsondepth.TOO_DEEP, code="invalid") from None
        problem = (jsondepth.TOO_DEEP if jsondepth.too_deep(converted) else None) or unstorable_text(converted)
        if problem:
            raise FormValidationError(problem, code="invalid")
        return converted

    def bound_data(self, data: Any, initial: Any) -> Any:
        """What the form shows again: JSON it refuses as the text it was sent as (a lone
        surrogate parsed and rendered again could not be encoded)."""
        try:
            value = super().bound_data(data, initial)
        except RecursionError:
            return InvalidJSONInput(data)
        if isinstance(value, InvalidJSONInput) or self.disabled:
            return value
        return InvalidJSONInput(data) if jsondepth.too_deep(value) or unstorable_text(value) else value
