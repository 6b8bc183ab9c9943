"""Re-encrypt every stored user key under the newest CREDENTIAL_ENCRYPTION_KEYS entry,
so the older keys can be retired once this reports no failure."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from credentials.services import credentials_rotate_keys


class Command(BaseCommand):
    help = "Re-encrypt every stored user model key under the newest encryption key, in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=500, help="rows per transaction (default 500)")

    def handle(self, *args: Any, batch_size: int, **options: Any) -> None:
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        report = credentials_rotate_keys(batch_size=batch_size)
        self.stdout.write(f"{report.rotated} credential(s) re-encrypted under key {report.current_key_id}.")
        if report.failed:
            raise CommandError(
                f"{len(report.failed)} credential(s) could not be decrypted and still use an older key: "
                + ", ".join(report.failed[:20])
                + (" ..." if len(report.failed) > 20 else "")
            )
        self.stdout.write(self.style.SUCCESS("No credential uses an older key; older keys can be retired."))
