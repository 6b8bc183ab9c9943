"""``python manage.py clean_asynch_tasks``: one run of model-asynch's cleaner now, the
same run Celery beat starts every ``ASYNCH_CLEANER_INTERVAL`` (even while
``ASYNCH_CLEANER_ENABLED`` is false, which stops only the periodic runs)."""

from django.core.management.base import BaseCommand

from asynch import services


class Command(BaseCommand):
    help = (
        "Run model-asynch's cleaner once: fail stuck tasks, re-queue failed ones with retries left, "
        "delete downloaded tasks past expireAt and failures past autoCleanSeconds, in bounded batches."
    )

    def handle(self, *args: object, **options: object) -> None:
        totals = services.tasks_clean(by_hand=True)
        summary = ", ".join(f"{name}={count}" for name, count in sorted(totals.items()) if count)
        self.stdout.write(summary or "nothing to clean")
