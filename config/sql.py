"""Plain SQL through Django's connection, for the few statements the ORM cannot
say in one go (``UPDATE ... RETURNING``, conditional upserts). Parameters are adapted
the way the ORM would, so the same statement runs on PostgreSQL and SQLite."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from django.db import connection


def adapt(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return connection.ops.adapt_datetimefield_value(value)
    if isinstance(value, dt.date):
        return connection.ops.adapt_datefield_value(value)
    return value


def fetch(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows a statement returns (none for one without ``RETURNING``)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, [adapt(p) for p in params])
        return cursor.fetchall() if cursor.description else []


def execute(sql: str, params: Sequence[Any] = ()) -> int:
    """Run a statement; the number of rows it changed."""
    with connection.cursor() as cursor:
        cursor.execute(sql, [adapt(p) for p in params])
        return cursor.rowcount


def placeholders(values: Sequence[Any]) -> str:
    """``%s, %s, ...`` for an ``IN (...)`` of these values."""
    return ", ".join(["%s"] * len(values))
