from celery import shared_task

from ops import retention


@shared_task(ignore_result=True)
def prune_data() -> dict[str, dict[str, int]]:
    return {kind: dict(counts) for kind, counts in retention.data_prune().kinds.items()}
