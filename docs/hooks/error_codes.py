"""A MkDocs hook: the error codes' tables of docs/api/errors.md, made from config/errors.py
(and protocol/errors.py, where the runtime's codes live) as the site is built, so the page can
never disagree with the code.

``<!-- error-codes -->`` becomes the table of ``ErrorCode`` (code, HTTP status, retryable),
``<!-- runtime-error-codes -->`` that of ``RuntimeErrorCode`` (code, retryable). The file is
read, not imported (importing it would need Django's settings). A code the page does not
explain somewhere besides the table fails the build: every code has its sentence.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
MARKERS = {"<!-- error-codes -->": "ErrorCode", "<!-- runtime-error-codes -->": "RuntimeErrorCode"}
FILES = {"ErrorCode": ROOT / "config" / "errors.py", "RuntimeErrorCode": ROOT / "protocol" / "errors.py"}


def members(enum: str) -> list[tuple[Any, ...]]:
    """The values of ``enum``'s members, in the order its file declares them."""
    path = FILES[enum]
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == enum:
            return [
                ast.literal_eval(item.value)
                for item in node.body
                if isinstance(item, ast.Assign) and isinstance(item.value, ast.Tuple)
            ]
    raise PluginError(f"{path} has no class {enum}")


def table(enum: str) -> str:
    if enum == "ErrorCode":
        rows = ["| code | HTTP status | retryable |", "|---|---|---|"]
        rows += [
            f"| `{code}` | {status} | {'yes' if retryable else 'no'} |" for code, status, retryable in members(enum)
        ]
    else:
        rows = ["| code | retryable |", "|---|---|"]
        rows += [f"| `{code}` | {'yes' if retryable else 'no'} |" for code, retryable in members(enum)]
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    found = [marker for marker in MARKERS if marker in markdown]
    if not found:
        return markdown
    for marker in found:
        unexplained = [value[0] for value in members(MARKERS[marker]) if f"`{value[0]}`" not in markdown]
        if unexplained:
            raise PluginError(f"{page.file.src_path} does not explain {', '.join(unexplained)}")
        markdown = markdown.replace(marker, table(MARKERS[marker]))
    return markdown
