"""What ``rerun_jobs`` and ``cancel_jobs`` share: the job list's filters as options,
and running the operation here, in batches, as the admin's Celery task would. With
``--operator``, the operation is that staff user's, in the admin log under their name."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ai_jobs import services
from ai_jobs.services.bulk import BATCH_SIZE
from config.errors import DomainError

OPTIONS = {
    "status": "status",
    "job_type": "job type",
    "error_code": "error code",
    "api_key_mode": "key mode: platform_key or user_deepseek_key",
    "user": "a username or a user's public id (usr_...)",
    "since": "created at or after this date or time (ISO 8601)",
    "until": "created before this date or time (ISO 8601)",
    "search": "the job list's search words",
}


class BulkCommand(BaseCommand):
    kind: str
    what: str

    def add_arguments(self, parser: CommandParser) -> None:
        for name, help_text in OPTIONS.items():
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None, help=help_text)
        parser.add_argument("--dry-run", action="store_true", help="count the jobs that match, change nothing")
        parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="jobs per transaction")
        parser.add_argument(
            "--operator",
            default=None,
            help="the staff username the operation is recorded for, in its record and the admin log "
            "(an active staff user with the admin's permission for it)",
        )

    def operator(self, username: str | None) -> AbstractBaseUser | None:
        if username is None:
            return None
        user = get_user_model()._default_manager.filter(**{get_user_model().USERNAME_FIELD: username}).first()
        if user is None or not user.is_active or not user.is_staff:
            raise CommandError(f"--operator: {username!r} is not an active staff user")
        if not user.has_perm(services.BULK_OPERATION_PERMISSION[self.kind]):
            raise CommandError(
                f"--operator: {username!r} lacks the permission {services.BULK_OPERATION_PERMISSION[self.kind]}"
            )
        return user

    def handle(self, *args: Any, dry_run: bool, batch_size: int, operator: str | None, **options: Any) -> None:
        raw = {name: options.get(name) for name in OPTIONS}
        by = self.operator(operator)
        try:
            job_filter = services.job_filter_clean(raw)
            if dry_run:
                matched = services.operation_jobs(kind=self.kind, job_filter=job_filter).count()
                self.stdout.write(f"dry run: {matched} {self.what} match {job_filter or 'every job'}; nothing changed")
                return
            operation = services.bulk_operation_start(kind=self.kind, job_filter=job_filter, by=by)
        except DomainError as error:
            raise CommandError(error.message) from error
        done = services.bulk_operation_run(operation_id=operation.id, batch_size=max(1, batch_size))
        assert done is not None  # just recorded: nobody else has taken it
        self.stdout.write(
            f"bulk operation {done.id}: matched {done.matched}, done {done.done}, "
            f"refused {done.refused}, skipped {done.skipped}"
        )
