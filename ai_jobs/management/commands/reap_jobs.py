from django.core.management.base import BaseCommand, CommandParser

from ai_jobs import services


class Command(BaseCommand):
    help = "Return lapsed AI jobs to the queue (or fail them with JOB_TIMEOUT), in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=None, help="jobs per transaction")

    def handle(self, *args: object, batch_size: int | None, **options: object) -> None:
        totals = services.jobs_reap(batch_size=batch_size)
        summary = ", ".join(f"{name}={count}" for name, count in sorted(totals.items())) or "nothing lapsed"
        self.stdout.write(summary)
