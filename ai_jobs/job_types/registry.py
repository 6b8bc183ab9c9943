"""The job-type registry: one declaration per job type, read by every part that
depends on the type (``ai_jobs/JOB_TYPES.md`` says how to add one).

Creation checks the type, its targets and its count parameter here; the runtime
API's capabilities, the user API's ``jobType`` and the OpenAPI enum take the names
from here; a result is validated against the type's output schema and stored by
its store function; the success notice says what its notice function says; the
user API's output lists and the admin's output pages are those of the registered
types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db.models import Model

from ai_jobs import output_schemas
from ai_jobs.models import AiRuntimeJob, AiRuntimeResult
from ai_jobs.outputs import OutputList
from ai_jobs.outputs.common import Stored

# A store may return what it learned (``Stored``); the notice is then given it as its
# second argument and need not read the rows back. ``notice(job)`` alone reads them.
Store = Callable[[AiRuntimeJob, dict[str, Any], AiRuntimeResult], Stored]
Notice = Callable[..., tuple[str, dict[str, Any]]]


@dataclass(frozen=True)
class CountParam:
    """How many items a job asks for: ``name`` at the top level of ``POST /ai/jobs``
    (as the mobile app sends it) or inside ``params``, stored in ``params``."""

    name: str
    low: int
    high: int
    default: int


@dataclass(frozen=True)
class JobType:
    name: str
    label: str  # what people call it: notices ("Quiz ready"), the OpenAPI enum
    target_types: frozenset[str]  # what POST /ai/jobs accepts as its targetType
    store: Store  # how an accepted output is stored, inside the result's transaction
    outputs: tuple[type[Model], ...]  # the models ``store`` writes (the admin shows them)
    lists: tuple[OutputList, ...]  # where the user reads them back
    notice: Notice  # the success notice's message and data: notice(job) or notice(job, stored)
    count: CountParam | None = None
    # ``<version>/<name>.json``: the output schemas, one per outputSchemaVersion.
    schema_dir: Path = output_schemas.SCHEMA_DIR

    def schema_versions(self) -> list[str]:
        return output_schemas.versions(self.schema_dir, self.name)

    def validation_errors(self, version: str, output: Any) -> list[str]:
        """The output's errors against its schema; UnknownSchema for a version it has none of."""
        return output_schemas.validation_errors(self.name, version, output, root=self.schema_dir)


_TYPES: dict[str, JobType] = {}


def register(job_type: JobType) -> JobType:
    if job_type.name in _TYPES and _TYPES[job_type.name] is not job_type:
        raise ValueError(f"Job type {job_type.name} is already registered")
    _TYPES[job_type.name] = job_type
    return job_type


def get(name: str) -> JobType | None:
    return _TYPES.get(name)


def all_types() -> list[JobType]:
    return list(_TYPES.values())


def names() -> list[str]:
    return list(_TYPES)


def choices() -> list[tuple[str, str]]:
    return [(job_type.name, job_type.label) for job_type in _TYPES.values()]


def count_params() -> dict[str, list[CountParam]]:
    """Each count parameter's name, with the declarations of the types that take it."""
    found: dict[str, list[CountParam]] = {}
    for job_type in _TYPES.values():
        if job_type.count is not None:
            found.setdefault(job_type.count.name, []).append(job_type.count)
    return found


def output_lists() -> list[OutputList]:
    """Every list of the registered types, once each, in the order they were declared."""
    return list(dict.fromkeys(output for job_type in _TYPES.values() for output in job_type.lists))


def output_models() -> list[type[Model]]:
    return list(dict.fromkeys(model for job_type in _TYPES.values() for model in job_type.outputs))
