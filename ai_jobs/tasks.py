from celery import shared_task
from django.db import InterfaceError, OperationalError

from ai_jobs import notifications, services


@shared_task(ignore_result=True)
def reap_jobs() -> dict[str, int]:
    return dict(services.jobs_reap())


@shared_task(ignore_result=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=True, max_retries=5)
def notify_job_finished(job_id: str) -> None:
    notifications.notification_create_for_job(job_id=job_id)
