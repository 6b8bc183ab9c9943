"""Re-encrypt every encrypted column of the platform (each app registers its own with
``config.keyring``) under the newest CREDENTIAL_ENCRYPTION_KEYS entry, in batches, and
say the older keys may be retired only once no value uses one."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config import keyring


class Command(BaseCommand):
    help = "Re-encrypt every secret at rest (users' keys, model configs' apiKey, tasks' forwarded headers) under the newest key."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=500, help="rows per transaction (default 500)")

    def handle(self, *args: Any, batch_size: int, **options: Any) -> None:
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        current = keyring.keyring().current.key_id
        self.stdout.write(f"Re-encrypting under key {current}, {batch_size} rows a transaction.")
        problems = []
        for column in keyring.registered_columns():
            report = keyring.rotate(column, batch_size=batch_size, on_batch=self._progress)
            self.stdout.write(f"{report.rotated} {report.noun}(s) re-encrypted under key {report.current_key_id}.")
            if report.failed:
                problems.append(
                    f"{len(report.failed)} {report.noun}(s) could not be decrypted and still use an older key: "
                    + ", ".join(report.failed[:20])
                    + (" ..." if len(report.failed) > 20 else "")
                )
            elif report.remaining:
                problems.append(f"{report.remaining} {report.noun}(s) still use an older key; run this again")
        if problems:
            raise CommandError("; ".join(problems))
        self.stdout.write(self.style.SUCCESS(f"Every encrypted value uses key {current}: older keys can be retired."))

    def _progress(self, report: keyring.RotationReport) -> None:
        self.stdout.write(
            f"  {report.column}: batch {report.batches}, {report.rotated} re-encrypted"
            + (f", {len(report.failed)} not decryptable" if report.failed else "")
        )
