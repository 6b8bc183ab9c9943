from celery import shared_task

from ai_jobs import services
from ai_jobs.notifications import notify_job_finished

__all__ = ["notify_job_finished", "reap_jobs"]


@shared_task(ignore_result=True)
def reap_jobs() -> dict[str, int]:
    return dict(services.jobs_reap())


@shared_task(ignore_result=True)
def sample_queue() -> None:
    services.queue_sample_record()


@shared_task(ignore_result=True)
def run_bulk_operation(operation_id: str) -> None:
    services.bulk_operation_run(operation_id=operation_id)


@shared_task(ignore_result=True)
def resume_bulk_operations() -> None:
    for operation_id in services.bulk_operations_stalled():
        run_bulk_operation.delay(operation_id)
