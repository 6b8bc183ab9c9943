"""Retention's engine: delete what is past its time in bounded batches of
short transactions, oldest first, with a cursor, the way django-celery-results'
``delete_expired`` does, and count exactly what a run would delete.

Each app declares its kinds as ``Sweep`` values (``ai_jobs.services.retention``,
``asynch.retention``); ``ops.retention`` runs them all, from Celery beat every
``RETENTION_INTERVAL_SECONDS`` and from ``python manage.py prune_data``.

A batch is one transaction: pick up to ``RETENTION_BATCH_SIZE`` due rows after the
cursor, in ``(order_by, pk)`` order, from an index on ``order_by`` (``FOR UPDATE SKIP
LOCKED`` on PostgreSQL, so a row someone is writing now waits for the next run), then
delete them through Django's collector, which deletes what cascades from them and
clears what points at them with ``SET_NULL``. The cursor starts each batch where the
last one ended, so no batch walks over the rows (or the dead index entries) that the
batches before it dealt with.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.db import models, transaction
from django.db.models import Q, QuerySet


@dataclass(frozen=True)
class Sweep:
    """One kind of data that retention deletes."""

    kind: str  # what prune_data prints: "snapshots", "jobs", ...
    due: Callable[[dt.datetime], QuerySet]  # the rows past their time at ``now``
    order_by: str  # a time field of the rows with an index; the cursor is (it, pk)
    # Rows that go with a batch but that no foreign key cascades to (they name the
    # batch's rows by a plain id): querysets of them, given the batch's rows.
    along: Callable[[QuerySet], list[QuerySet]] = lambda rows: []
    # A field naming a stored file, and how to delete such files: they go once the
    # deletion of their rows has committed, so no row ever names a missing file.
    file_field: str | None = None
    delete_files: Callable[[list[str]], int] | None = None


Progress = Callable[[str, Counter[str], int], None]  # (kind, deleted so far per table, batches)


def label(model: type[models.Model]) -> str:
    return model._meta.label


def cascade_counts(rows: QuerySet) -> Counter[str]:
    """How many rows deleting ``rows`` deletes, per model label: the rows, and what
    cascades from them, through every ``CASCADE`` foreign key, however deep. (What
    ``SET_NULL`` points at stays and is not counted.)"""
    counts: Counter[str] = Counter({label(rows.model): rows.count()})
    for relation in rows.model._meta.related_objects:
        if relation.on_delete is models.CASCADE:
            related = relation.related_model._base_manager.filter(**{f"{relation.field.name}__in": rows})
            counts += cascade_counts(related)
    return counts


def sweep_count(sweep: Sweep, *, now: dt.datetime) -> Counter[str]:
    """Exactly what ``sweep_run`` would delete now, per model label (and ``files``)."""
    rows = sweep.due(now)
    counts = cascade_counts(rows)
    for along in sweep.along(rows):
        counts += cascade_counts(along)
    if sweep.file_field:
        stored = rows.exclude(**{f"{sweep.file_field}__isnull": True}).exclude(**{sweep.file_field: ""})
        counts["files"] = stored.count()
    return +counts


def sweep_run(sweep: Sweep, *, now: dt.datetime, batch_size: int, progress: Progress | None = None) -> Counter[str]:
    """Delete what is due, batch after batch, until a batch comes back short."""
    model = sweep.due(now).model
    totals: Counter[str] = Counter()
    cursor: tuple[Any, Any] | None = None
    batches = 0
    while True:
        with transaction.atomic():
            picked = _pick(sweep, now=now, cursor=cursor, limit=batch_size)
            if picked:
                # Only the keys: the collector need not read what it deletes (a snapshot's payload).
                rows = model._base_manager.filter(pk__in=[pk for _, pk, _ in picked]).only("pk")
                totals += _delete(sweep, rows, files=[f for _, _, f in picked if f])
        if not picked:
            break
        batches += 1
        cursor = picked[-1][0], picked[-1][1]
        if progress is not None:
            progress(sweep.kind, totals, batches)
        if len(picked) < batch_size:
            break
    return +totals


def _pick(sweep: Sweep, *, now: dt.datetime, cursor: tuple[Any, Any] | None, limit: int) -> list[tuple[Any, Any, Any]]:
    rows = sweep.due(now)
    if cursor is not None:
        at, pk = cursor
        # The redundant ``>=`` lets the index scan start at the cursor.
        rows = rows.filter(Q(**{f"{sweep.order_by}__gt": at}) | Q(**{sweep.order_by: at, "pk__gt": pk})).filter(
            **{f"{sweep.order_by}__gte": at}
        )
    fields = [sweep.order_by, "pk", sweep.file_field] if sweep.file_field else [sweep.order_by, "pk"]
    picked = rows.order_by(sweep.order_by, "pk").select_for_update(skip_locked=True, of=("self",))
    return [(*row, None)[:3] for row in picked.values_list(*fields)[:limit]]


def _delete(sweep: Sweep, rows: QuerySet, *, files: list[str]) -> Counter[str]:
    deleted: Counter[str] = Counter()
    for along in sweep.along(rows):
        deleted.update(along.delete()[1])
    deleted.update(rows.delete()[1])
    if files and sweep.delete_files is not None:
        deleted["files"] += len(files)
        transaction.on_commit(partial(sweep.delete_files, files))
    return deleted


@dataclass
class Report:
    """What one prune did (or, dry, would do), per kind and table."""

    dry_run: bool
    kinds: dict[str, Counter[str]] = field(default_factory=dict)
    seconds: float = 0.0

    def total(self) -> int:
        return sum(n for counts in self.kinds.values() for key, n in counts.items() if key != "files")


def prune(
    sweeps: list[Sweep],
    *,
    now: dt.datetime,
    batch_size: int,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> Report:
    """Every sweep in order: count them (``dry_run``) or delete them."""
    report = Report(dry_run=dry_run)
    started = time.monotonic()
    for sweep in sweeps:
        if dry_run:
            report.kinds[sweep.kind] = sweep_count(sweep, now=now)
        else:
            report.kinds[sweep.kind] = sweep_run(sweep, now=now, batch_size=batch_size, progress=progress)
    report.seconds = time.monotonic() - started
    return report
