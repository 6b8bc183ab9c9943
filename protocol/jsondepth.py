"""How deep JSON may nest wherever the platform parses it: request bodies (the
parser), headers that carry JSON (model-asynch's ``X-User-Info``), and an output
before its schema is checked (``protocol.output_schemas``, on the server and in the
reference runtime, which also takes a ``RecursionError`` of its own parsing as a model
answer that is not JSON). Past ``MAX_DEPTH`` levels of arrays and objects a value is
refused as bad input: Python's parser and jsonschema recurse once per level, so a deep
enough value would end in a ``RecursionError`` (a 500) instead of a 400 ``VALIDATION_ERROR``.

The depth is measured level by level, never by recursion, in one pass that also
hands each string to the caller, so a parser that checks its text pays one walk.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # levels of arrays and objects; deeper is a 400 VALIDATION_ERROR
TOO_DEEP = f"JSON nested deeper than {MAX_DEPTH} levels"


class TooDeep(ValueError):
    """Nested deeper than ``MAX_DEPTH``: a ValueError, as any other JSON that cannot be used."""

    def __init__(self, message: str = TOO_DEEP) -> None:
        super().__init__(message)


def too_deep(value: Any, *, limit: int = MAX_DEPTH, strings: list[str] | None = None) -> bool:
    """Whether ``value`` (parsed JSON) nests deeper than ``limit``. With ``strings``,
    every string in it, keys included, is appended there (up to the level that
    was too deep)."""
    if isinstance(value, str):
        if strings is not None:
            strings.append(value)
        return False
    if not isinstance(value, (dict, list)):
        return False
    level: list[Any] = [value]
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for container in level:
            if isinstance(container, dict):
                if strings is not None:
                    strings.extend(container)  # the keys
                children = container.values()
            else:
                children = container
            for child in children:
                if isinstance(child, (dict, list)):
                    below.append(child)
                elif strings is not None and isinstance(child, str):
                    strings.append(child)
        level = below
    return False


def loads(text: str | bytes, **kwargs: Any) -> Any:
    """``json.loads``, refusing (``TooDeep``, a ValueError) what nests past ``MAX_DEPTH``."""
    try:
        value = json.loads(text, **kwargs)
    except RecursionError:
        raise TooDeep() from None
    if too_deep(value):
        raise TooDeep()
    return value
