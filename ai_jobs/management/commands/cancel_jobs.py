from ai_jobs.management.commands._bulk import BulkCommand
from ai_jobs.models import BulkOperationKind


class Command(BulkCommand):
    help = (
        "Cancel every pending, locked or running job matching the filters: pending ones at once, the others "
        "asked to stop (their runtime sees it on its next heartbeat)."
    )
    kind = BulkOperationKind.CANCEL
    what = "pending, locked or running job(s)"
