"""Plain SQL through Django's connection, for the few statements the ORM cannot
say in one go (``UPDATE ... RETURNING``, conditional upserts). Parameters are adapted
the way the ORM would, so the same statement runs on PostgreSQL and SQLite."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from django.db.models import NOT_PROVIDED, Field, Model
from django.utils import timezone
from psycopg import pq

M = TypeVar("M", bound=Model)


def adapt(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return connection.ops.adapt_datetimefield_value(value)
    if isinstance(value, dt.date):
        return connection.ops.adapt_datefield_value(value)
    return value


def rows_of(cursor: CursorWrapper) -> list[tuple[Any, ...]]:
    """The rows of the statement the cursor just ran (none for one that returns none).
    On PostgreSQL asked of the result's status: psycopg's ``description`` builds an
    object per column each time it is read, which the hot path's statements felt."""
    result = getattr(cursor.cursor, "pgresult", None)
    if result is not None:
        return cursor.fetchall() if result.status == pq.ExecStatus.TUPLES_OK else []
    return cursor.fetchall() if cursor.description else []


Params = Sequence[Any] | Mapping[str, Any]


def _adapted(db: BaseDatabaseWrapper, params: Params) -> list[Any] | dict[str, Any]:
    # PostgreSQL's adapters take datetimes and dates as they are (Django's own do nothing
    # to them there); SQLite's want text. Named parameters (``%(job_id)s``) come as a mapping.
    if isinstance(params, Mapping):
        return dict(params) if db.vendor == "postgresql" else {k: adapt(v) for k, v in params.items()}
    return list(params) if db.vendor == "postgresql" else [adapt(p) for p in params]


def fetch(sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
    """The rows a statement returns (none for one without ``RETURNING``)."""
    db = connections[DEFAULT_DB_ALIAS]  # resolved once, not per use through the proxy
    with db.cursor() as cursor:
        cursor.execute(sql, _adapted(db, params))
        return rows_of(cursor)


def execute(sql: str, params: Params = ()) -> int:
    """Run a statement; the number of rows it changed."""
    db = connections[DEFAULT_DB_ALIAS]
    with db.cursor() as cursor:
        cursor.execute(sql, _adapted(db, params))
        return cursor.rowcount


_INSERTS: dict[tuple[str, str, tuple[str, ...], int, str], str] = {}
# Fields whose values the database needs prepared (JSON dumped, datetimes and decimals
# adapted); the others take a plain str, int, float or bool as it is.
_PREPARED = frozenset({"JSONField", "DateTimeField", "DateField", "TimeField", "DecimalField", "UUIDField"})
_PLAIN = (str, int, float, bool)
# Per model, each concrete field's attname, whether it is dated now when missing, whether
# its value needs preparing, and whether the database gives it its value when missing
# (an auto-incremented key, a ``db_default``): what insert_rows would otherwise ask
# every field of every row.
_PLANS: dict[type[Model], list[tuple[Field, str, bool, bool, bool]]] = {}  # type: ignore[type-arg]


def _plan(model: type[Model]) -> list[tuple[Field, str, bool, bool, bool]]:  # type: ignore[type-arg]
    plan = _PLANS.get(model)
    if plan is None:
        plan = _PLANS[model] = [
            (
                field,
                field.attname,
                bool(getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)),
                field.get_internal_type() in _PREPARED,
                getattr(field, "db_returning", False) or field.db_default is not NOT_PROVIDED,
            )
            for field in model._meta.concrete_fields
        ]
    return plan


def insert_rows(model: type[Model], rows: Sequence[dict[str, Any]], *, suffix: str = "") -> list[tuple[Any, ...]]:
    """One multi-row ``INSERT ... VALUES (...), (...)`` of ``rows`` (each a dict of
    field attnames, all with the same keys), with ``suffix`` after it (``ON CONFLICT DO
    NOTHING RETURNING ...``): the rows it returns. As the ORM would insert them: a
    missing field takes its default (``auto_now`` fields the time), or is left to the
    database when it gives one (an auto-incremented key, ``db_default``), and each value
    is prepared by its field (JSON, decimals, datetimes on either database). The
    statement's text is built once per model, columns, row count and suffix, so the hot
    path compiles no ORM query."""
    if not rows:
        return []
    db = connections[DEFAULT_DB_ALIAS]  # resolved once, not per value through the proxy
    given = rows[0].keys()
    plan = [step for step in _plan(model) if step[1] in given or not step[4]]
    key = (db.vendor, model._meta.db_table, tuple(step[1] for step in plan), len(rows), suffix)
    sql = _INSERTS.get(key)
    if sql is None:
        columns = ", ".join(db.ops.quote_name(field.column) for field, *_ in plan)
        row = f"({', '.join(['%s'] * len(plan))})"
        sql = f"INSERT INTO {model._meta.db_table} ({columns}) VALUES {', '.join([row] * len(rows))} {suffix}".strip()
        _INSERTS[key] = sql
    params: list[Any] = []
    now = None
    for values in rows:
        for field, attname, dated, prepared, _ in plan:
            if attname in values:
                value = values[attname]
            elif dated:
                now = now or timezone.now()
                value = now
            else:
                value = field.get_default()
            if value is None or (not prepared and isinstance(value, _PLAIN)):
                params.append(value)
            else:
                params.append(field.get_db_prep_save(value, db))
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        return rows_of(cursor)


# --- model instances from fixed statements ----------------------------------------------------------


_CONVERTERS: dict[tuple[str, Field], tuple[Any, list[Any]]] = {}  # type: ignore[type-arg]


def from_db_value(field: Field, value: Any) -> Any:  # type: ignore[type-arg]
    """A column's value as the ORM would load it (SQLite's booleans and timestamps come as
    numbers and text; PostgreSQL's driver already gives Python's types). The converters
    are looked up once per database and field, not on every row."""
    key = (connection.vendor, field)
    found = _CONVERTERS.get(key)
    if found is None:
        expression = field.get_col(field.model._meta.db_table)
        found = _CONVERTERS[key] = (
            expression,
            connection.ops.get_db_converters(expression) + expression.get_db_converters(connection),
        )
    expression, converters = found
    for converter in converters:
        value = converter(value, expression, connection)
    return value


def from_row(model: type[M], values: Sequence[Any], *, attnames: Sequence[str] | None = None) -> M:
    """An instance of ``model`` from the first values of a row that holds its columns in
    the model's order; ``attnames``: of only these fields, in that order (the others
    deferred)."""
    if attnames is None:
        fields = model._meta.concrete_fields
        attnames = [field.attname for field in fields]
    else:
        fields = [model._meta.get_field(name) for name in attnames]  # attnames and names alike
    return model.from_db(
        connection.alias,
        attnames,
        [from_db_value(field, value) for field, value in zip(fields, values, strict=False)],
    )
