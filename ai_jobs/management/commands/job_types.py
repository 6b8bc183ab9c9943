from django.core.management.base import BaseCommand, CommandError, CommandParser

from ai_jobs import job_types
from ai_jobs.models import JobTypePause
from ai_jobs.services.pauses import job_types_pause, job_types_resume
from config.errors import DomainError


class Command(BaseCommand):
    help = (
        "Pause or resume job types, or list them. A paused type's jobs are still created and wait pending; "
        "runtimes are not handed them; jobs already running finish. Every web process follows within seconds."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True)
        pause = verbs.add_parser("pause", help="pause the named job types")
        pause.add_argument("names", nargs="+", metavar="jobType")
        pause.add_argument("--reason", default="", help="why, shown on the dashboard and in admin")
        resume = verbs.add_parser("resume", help="resume the named job types")
        resume.add_argument("names", nargs="+", metavar="jobType")
        verbs.add_parser("list", help="every job type, paused or not")

    def handle(
        self, *args: object, verb: str, names: list[str] | None = None, reason: str = "", **options: object
    ) -> None:
        try:
            if verb == "pause":
                paused = job_types_pause(names=names or [], by="manage.py job_types", reason=reason)
                self.stdout.write(f"paused: {', '.join(paused) or 'none newly'}")
            elif verb == "resume":
                resumed = job_types_resume(names=names or [])
                self.stdout.write(f"resumed: {', '.join(resumed) or 'none was paused'}")
        except DomainError as error:
            raise CommandError(error.message) from error
        paused_rows = {row.job_type: row for row in JobTypePause.objects.all()}
        if verb == "list":
            for name in job_types.names():
                row = paused_rows.get(name)
                state = f"paused since {row.paused_at:%Y-%m-%d %H:%M:%S} by {row.paused_by}" if row else "not paused"
                self.stdout.write(f"{name:<24} {state}{f' ({row.reason})' if row and row.reason else ''}")
