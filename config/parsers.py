"""The JSON every endpoint accepts: what PostgreSQL can store and a response can
render. A NUL character or a lone surrogate (``"\\ud800"``) anywhere in a key or a
string is refused at the door as a 400, instead of failing later in the database
or the renderer, once the row may already be written."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser


def unstorable_text(value: Any) -> str | None:
    """Why ``value`` (parsed JSON) cannot be stored, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "Text must not contain NUL characters."
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "Text must be valid Unicode (no lone surrogates)."
    return None


class StorableJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        if isinstance(data, dict):  # name the top-level field the bad text is in
            for key, value in data.items():
                problem = unstorable_text(key) or unstorable_text(value)
                if problem:
                    raise ValidationError({str(key).encode("utf-8", "replace").decode(): [problem]})
        problem = unstorable_text(data)
        if problem:
            raise ParseError(f"JSON parse error - {problem}")
        return data
