from celery import shared_task

from ai_jobs import services


@shared_task(ignore_result=True)
def reap_jobs() -> dict[str, int]:
    return dict(services.jobs_reap())
