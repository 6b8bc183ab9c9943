"""The quick start: the commands ``make run`` prints and the README opens with. One
text per block (``ops/quickstart/<block>.sh``) with ``{{ name }}`` placeholders;
``make run`` renders it with its own values, the README holds the rendering with the
defaults, and ``tests/test_quickstart.py`` checks the README's copy against this and
runs it against a live ``make run``, so the two cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

from ops.demo import DEMO_MODEL

TEMPLATES = Path(__file__).with_name("quickstart")
BLOCKS = ("learner", "model_asynch", "account")  # make run prints them all (model_asynch with its stand-in)
DEFAULT_TENANT_KEY = "ak_demo_make_run_local_key"  # like admin/admin: for make run only
DEFAULTS = {
    "api": "http://127.0.0.1:8000",
    "learner": "demo",
    "password": "demo",
    "tenant_key": DEFAULT_TENANT_KEY,
    "model": DEMO_MODEL,
}
_PLACEHOLDER = re.compile(r"\{\{ ([a-z_]+) \}\}")


def render(block: str, **values: str) -> str:
    """The block with its placeholders filled (``DEFAULTS`` for any not given)."""
    filled = {**DEFAULTS, **values}
    text = (TEMPLATES / f"{block}.sh").read_text()
    return _PLACEHOLDER.sub(lambda found: filled[found.group(1)], text)


def readme_block(readme: str, block: str) -> str | None:
    """The README's copy of a block: the ``sh`` code block after ``<!-- quickstart:<block> -->``."""
    found = re.search(rf"<!-- quickstart:{block} -->\s*```sh\n(.*?)```", readme, re.DOTALL)
    return found.group(1) if found else None
