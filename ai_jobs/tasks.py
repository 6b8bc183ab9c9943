from celery import shared_task
from django.db import InterfaceError, OperationalError

from ai_jobs import notifications, services
from config.observability.context import bound
from config.observability.metrics import NOTIFICATIONS_FAILED

_TRANSIENT = (OperationalError, InterfaceError)


@shared_task(ignore_result=True)
def reap_jobs() -> dict[str, int]:
    return dict(services.jobs_reap())


@shared_task(ignore_result=True)
def sample_queue() -> None:
    services.queue_sample_record()


@shared_task(bind=True, ignore_result=True, autoretry_for=_TRANSIENT, retry_backoff=True, max_retries=5)
def notify_job_finished(self, job_id: str) -> None:  # type: ignore[no-untyped-def]
    with bound(jobId=job_id):
        try:
            notifications.notification_create_for_job(job_id=job_id)
        except Exception as error:
            # Counted once it is given up on: not retried, or out of retries.
            if not isinstance(error, _TRANSIENT) or self.request.retries >= self.max_retries:
                NOTIFICATIONS_FAILED.inc()
            raise
