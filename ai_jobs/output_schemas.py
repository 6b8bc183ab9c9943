"""The output schemas of the job types: the shared module's (``protocol.output_schemas``,
the JSON files under ``protocol/schemas/``), under the name the server has always used."""

from protocol.output_schemas import (
    DEFAULT_VERSION,
    SCHEMA_DIR,
    UnknownSchema,
    canonical_json,
    output_hash,
    schema,
    validation_errors,
    versions,
)

__all__ = [
    "DEFAULT_VERSION",
    "SCHEMA_DIR",
    "UnknownSchema",
    "canonical_json",
    "output_hash",
    "schema",
    "validation_errors",
    "versions",
]
