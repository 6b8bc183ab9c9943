"""``python manage.py prune_data [--dry-run]``: delete what is past its retention now,
printing what went per kind and table, with progress on a long run."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from ops import retention

PROGRESS_EVERY_SECONDS = 2.0


def table_name(key: str) -> str:
    if key == "files":
        return "stored files"
    return str(apps.get_model(key)._meta.verbose_name_plural)


class Command(BaseCommand):
    help = (
        "Delete finished jobs, snapshots, notifications, unclaimed model-asynch tasks and old daily counters "
        "past their retention."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Count what would be deleted; delete nothing.")

    def handle(self, *args: Any, dry_run: bool = False, **options: Any) -> None:
        verb = "would delete" if dry_run else "deleted"
        self.stdout.write(
            f"prune_data{' --dry-run' if dry_run else ''}: batches of {settings.RETENTION_BATCH_SIZE}; "
            f"snapshots after {settings.AI_SNAPSHOT_RETENTION_DAYS} d, jobs after {settings.AI_JOB_RETENTION_DAYS} d, "
            f"notifications after {settings.AI_NOTIFICATION_RETENTION_DAYS} d, "
            f"unclaimed model-asynch tasks after {settings.ASYNCH_UNCLAIMED_RETENTION_SECONDS} s, "
            f"daily counters after {settings.AI_COUNTER_RETENTION_DAYS} d"
        )
        started = time.monotonic()
        last = started

        def progress(kind: str, deleted: Counter[str], batches: int) -> None:
            nonlocal last
            now = time.monotonic()
            if now - last >= PROGRESS_EVERY_SECONDS:
                last = now
                self.stdout.write(
                    f"  {kind}: {sum(deleted.values()):,} rows so far ({batches} batches, {now - started:.0f} s)"
                )

        report = retention.data_prune(dry_run=dry_run, progress=progress)
        for kind, counts in report.kinds.items():
            rows = sum(n for key, n in counts.items() if key != "files")
            detail = ", ".join(f"{table_name(key)} {n:,}" for key, n in sorted(counts.items()))
            self.stdout.write(f"{kind}: {verb} {rows:,}" + (f" ({detail})" if detail else ""))
        self.stdout.write(f"{'counted' if dry_run else 'done'} in {report.seconds:.1f} s: {report.total():,} rows")
