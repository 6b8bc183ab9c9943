"""Prompt templates, one file per job type and prompt version:

    templates/prompts/<promptVersion>/<jobType>.txt

A job names its ``promptVersion`` (default ``v1``); a new version is a new
directory, so a job created under ``v1`` renders the same prompt until it ends.
A template has two sections, introduced by a line ``=== system ===`` and a line
``=== user ===``, and ``string.Template`` placeholders (``$$`` for a dollar):

    $job_type $target_type $target_id $output_schema_version
    $snapshot_json  $params_json  $output_schema (the job type's JSON Schema)
    $question_count $card_count (quiz / flashcard jobs)

The system section is the same for every job of a type (instructions and the
output schema), so DeepSeek's context cache serves it at the cache-hit price; the
job's data is in the user section. Snapshot and parameters sit between
``<snapshot>``/``</snapshot>`` and ``<params>``/``</params>`` tags.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from protocol import output_schemas

PROMPT_DIR = Path(__file__).resolve().parent.parent / "templates" / "prompts"
DEFAULT_VERSION = "v1"
_SECTION = "=== {} ==="


class UnknownPrompt(LookupError):
    """No template for this job type and prompt version."""


@dataclass(frozen=True)
class Prompt:
    system: str
    user: str

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


def _safe_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\\" not in name and not name.startswith(".")


@cache
def _template(job_type: str, version: str, root: Path = PROMPT_DIR) -> tuple[string.Template, string.Template]:
    if not (_safe_name(job_type) and _safe_name(version)):
        raise UnknownPrompt(f"{version}/{job_type}")
    path = root / version / f"{job_type}.txt"
    if not path.is_file():
        raise UnknownPrompt(f"{version}/{job_type}")
    text = path.read_text()
    system_mark, user_mark = _SECTION.format("system"), _SECTION.format("user")
    if system_mark not in text or user_mark not in text:
        raise UnknownPrompt(f"{path} lacks the '{system_mark}' and '{user_mark}' lines")
    system = text.split(system_mark, 1)[1].split(user_mark, 1)[0]
    user = text.split(user_mark, 1)[1]
    return string.Template(system.strip()), string.Template(user.strip())


def job_types(version: str = DEFAULT_VERSION) -> list[str]:
    """Job types with a template in this version and an output schema: what a
    runtime can do."""
    folder = PROMPT_DIR / version
    if not folder.is_dir():
        return []
    known = []
    for path in sorted(folder.glob("*.txt")):
        try:
            output_schemas.schema(path.stem, output_schemas.DEFAULT_VERSION)
        except output_schemas.UnknownSchema:
            continue
        known.append(path.stem)
    return known


def check(
    job_type: str,
    prompt_version: str | None,
    schema_version: str | None,
    *,
    prompt_dir: Path = PROMPT_DIR,
    schema_dir: Path = output_schemas.SCHEMA_DIR,
) -> None:
    """Raises UnknownPrompt / UnknownSchema when this runtime cannot run the job."""
    _template(job_type, prompt_version or DEFAULT_VERSION, prompt_dir)
    output_schemas.schema(job_type, schema_version or output_schemas.DEFAULT_VERSION, schema_dir)


@cache
def _schema_json(job_type: str, version: str, root: Path) -> str:
    return json.dumps(output_schemas.schema(job_type, version, root), sort_keys=True)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True)


def render(
    *,
    job_type: str,
    prompt_version: str | None,
    output_schema_version: str | None,
    target_type: str,
    target_id: str,
    snapshot: dict[str, Any],
    params: dict[str, Any],
    prompt_dir: Path = PROMPT_DIR,
    schema_dir: Path = output_schemas.SCHEMA_DIR,
) -> Prompt:
    """The job's prompt from its type's template (under ``prompt_dir``) and output
    schema (under ``schema_dir``)."""
    system, user = _template(job_type, prompt_version or DEFAULT_VERSION, prompt_dir)
    schema_version = output_schema_version or output_schemas.DEFAULT_VERSION
    values = {
        "job_type": job_type,
        "target_type": target_type,
        "target_id": target_id,
        "output_schema_version": schema_version,
        "output_schema": _schema_json(job_type, schema_version, schema_dir),
        "snapshot_json": _json(snapshot),
        "params_json": _json(params),
        "question_count": str(count(params, "questionCount", 10, 50)),
        "card_count": str(count(params, "cardCount", 20, 100)),
    }
    return Prompt(system=system.safe_substitute(values), user=user.safe_substitute(values))


def count(params: dict[str, Any], key: str, default: int, most: int) -> int:
    """How many items the job asks for: ``params[key]`` within 1 to ``most``. The
    server stores every count a job type takes in its params; the defaults are for a
    job made without one."""
    try:
        value = int(params.get(key, default))
    except (TypeError, ValueError):
        value = default
    return max(1, min(most, value))
