from celery import shared_task

from asynch import services, worker


@shared_task(ignore_result=True)
def work() -> dict[str, int]:
    return dict(worker.tasks_drain())


@shared_task(ignore_result=True)
def clean() -> dict[str, int]:
    return dict(services.tasks_clean())
