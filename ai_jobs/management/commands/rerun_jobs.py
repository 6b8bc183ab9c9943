from ai_jobs.management.commands._bulk import BulkCommand
from ai_jobs.models import BulkOperationKind


class Command(BulkCommand):
    help = (
        "Rerun every failed job matching the filters, as new jobs (retriedFromJobId), by the single rerun's "
        "rules: a job rerun already is skipped, one whose user has AI analysis off is refused."
    )
    kind = BulkOperationKind.RERUN
    what = "failed job(s)"
