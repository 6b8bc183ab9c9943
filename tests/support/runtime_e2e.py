"""Jobs for the reference runtime's end-to-end tests (gunicorn, the stand-in model,
runtimes: ``tests/runtime_fixtures.py``): made with the ORM, watched in the database
until they reach a final status, and the stand-in's count of the calls it took."""

from __future__ import annotations

import uuid
from typing import Any

from accounts.selectors import public_id_of
from ai_jobs.models import AiRuntimeJob
from runtime_worker.standin import StandinServer
from tests.support.factories import JobFactory, UserFactory
from tests.support.runtime_fixtures import wait_for

FINAL = ("succeeded", "failed", "cancelled")


def _target(user: Any, job_type: str) -> tuple[str, str]:
    """Quiz and flashcard jobs need a knowledge base; the others analyse the learner."""
    if job_type not in ("quiz_generation", "flashcard_generation"):
        return "user", public_id_of(user)
    try:
        from learning.models import KnowledgeBase
    except ImportError:  # the learning domain is not there yet
        return "knowledge_base", f"kb_{uuid.uuid4().hex[:12]}"
    return "knowledge_base", KnowledgeBase.objects.create(user=user, name="Fractions").id


def make_job(job_type: str = "learning_state_analysis", *, user: Any = None, **fields: Any) -> AiRuntimeJob:
    user = user or UserFactory()
    target_type, target_id = _target(user, job_type)
    return JobFactory(user=user, job_type=job_type, target_type=target_type, target_id=target_id, **fields)


def final(job: AiRuntimeJob, *, timeout: float = 60) -> AiRuntimeJob:
    wait_for(
        lambda: AiRuntimeJob.objects.filter(id=job.id, status__in=FINAL).exists(),
        timeout=timeout,
        what=f"{job.id} to end",
    )
    return AiRuntimeJob.objects.get(id=job.id)


def standin_requests(standin: StandinServer, job_type: str = "learning_state_analysis") -> int:
    return standin.model.snapshot_stats().get(f"job:{job_type}", 0)
