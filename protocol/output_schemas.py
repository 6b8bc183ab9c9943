"""The output schemas of the job types, one JSON Schema per job type and version
(``protocol/schemas/<version>/<jobType>.json``; a job type declared elsewhere may name
another directory laid out the same way). Free of Django on purpose: the reference
runtime, a program of its own, validates the model's output with the very same schemas."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from protocol import jsondepth

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
DEFAULT_VERSION = "v1"


class UnknownSchema(LookupError):
    """No schema for this job type and version."""


def versions(root: Path = SCHEMA_DIR, job_type: str | None = None) -> list[str]:
    """The schema versions under ``root``; with ``job_type``, those that have its schema."""
    return sorted(
        p.name for p in root.iterdir() if p.is_dir() and (job_type is None or (p / f"{job_type}.json").is_file())
    )


@cache
def schema(job_type: str, version: str, root: Path = SCHEMA_DIR) -> dict[str, Any]:
    if "/" in version or "/" in job_type or version.startswith("."):
        raise UnknownSchema(f"{job_type}/{version}")
    path = root / version / f"{job_type}.json"
    if not path.is_file():
        raise UnknownSchema(f"{job_type}/{version}")
    return json.loads(path.read_text())


@cache
def _validator(job_type: str, version: str, root: Path) -> Draft202012Validator:
    return Draft202012Validator(schema(job_type, version, root))


def validation_errors(
    job_type: str, version: str, output: Any, *, limit: int = 10, root: Path = SCHEMA_DIR
) -> list[str]:
    """The output's schema errors, ``path: message`` each, at most ``limit``;
    raises UnknownSchema for a job type or version with no schema. An output nested
    deeper than JSON may be is one error, found before the validator recurses into it."""
    validator = _validator(job_type, version, root)
    if jsondepth.too_deep(output):
        return [f"(root): {jsondepth.TOO_DEEP}"]
    errors = []
    for error in validator.iter_errors(output):
        path = "/".join(str(p) for p in error.absolute_path) or "(root)"
        errors.append(f"{path}: {error.message}")
        if len(errors) >= limit:
            break
    return errors


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def output_hash(output: Any) -> str:
    """SHA-256 of the canonical JSON of ``output``."""
    return hashlib.sha256(canonical_json(output).encode()).hexdigest()
