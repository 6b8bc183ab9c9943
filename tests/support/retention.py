"""A learner with one of everything, made the way the platform makes it (the user
API, the internal API, the services), for the retention and user-deletion tests."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from axes.models import AccessAttempt, AccessAttemptExpiration, AccessFailureLog, AccessLog
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient
from rest_framework_simplejwt.token_blacklist.models import OutstandingToken

from ai_jobs.models import AiJobSnapshot, AiRuntimeJob, Notification
from ai_jobs.notifications import notification_create_for_job
from ai_jobs.services import job_rerun
from ai_jobs.services.handout import job_snapshot
from asynch.models import AsynchModelStat
from config.days import platform_day
from delivery.models import Delivery
from delivery.services.outbox import delivery_send
from quotas.models import ApiKeyMode, CircuitBreakerEvent, CircuitState, PlatformDailyUsage, UserAiUsage
from tests.support.api import ALL_TYPES, RuntimeClient
from tests.support.factories import VALID_OUTPUTS, UserFactory
from tests.support.learning_factories import (
    KnowledgeBaseFactory,
    KnowledgePointFactory,
    LearningProfileFactory,
    MaterialFactory,
    StudyRecordFactory,
)
from tests.support.user_api import Learner

KNOWLEDGE_BASE_TYPES = {"quiz_generation", "flashcard_generation"}
FACTORY_PASSWORD = "pw-123456"  # tests.support.factories.UserFactory's


@dataclass
class Everything:
    learner: Learner
    jobs: dict[str, AiRuntimeJob] = field(default_factory=dict)  # job type → a succeeded job
    failed: AiRuntimeJob | None = None
    rerun: AiRuntimeJob | None = None
    cancelled: AiRuntimeJob | None = None
    pending: AiRuntimeJob | None = None

    @property
    def user(self):  # type: ignore[no-untyped-def]
        return self.learner.user


def output_for(job_type: str, tag: str) -> dict:
    """A valid output whose questions and cards are new to the knowledge base."""
    output = {key: value for key, value in VALID_OUTPUTS[job_type].items()}
    if job_type == "quiz_generation":
        output = {"questions": [{**output["questions"][0], "stem": f"{tag}: 1/2 + 1/4 = ?"}]}
    if job_type == "flashcard_generation":
        output = {"flashcards": [{"front": f"{tag}: numerator", "back": "The top of a fraction"}]}
    return output


def create_job(learner: Learner, job_type: str, knowledge_base_id: str) -> AiRuntimeJob:
    if job_type in KNOWLEDGE_BASE_TYPES:
        response = learner.job(job_type, targetType="knowledge_base", targetId=knowledge_base_id)
    else:
        response = learner.job(job_type)
    assert response.status_code == 201, response.json()
    return AiRuntimeJob.objects.get(id=response.json()["jobId"])


def run_job(runtime: RuntimeClient, job: AiRuntimeJob, *, tag: str) -> AiRuntimeJob:
    """A runtime's path: lock, heartbeat, an invocation log, the result with its
    usage, then the success notice."""
    lock = runtime.lock(job.id)
    assert lock.status_code == 200, lock.json()
    attempt = lock.json()["attemptNo"]
    assert runtime.heartbeat(job.id).status_code == 200
    log = {"attemptNo": attempt, "modelName": "deepseek-chat", "requestId": f"req-{job.id}", "httpStatus": 200}
    assert runtime.post(f"jobs/{job.id}/invocation-logs", {"logs": [log]}).status_code == 201
    response = runtime.result(
        job.id, attempt, output_for(job.job_type, tag), usage={"promptTokens": 10, "completionTokens": 5}
    )
    assert response.status_code == 200, response.json()
    notification_create_for_job(job_id=job.id)
    return AiRuntimeJob.objects.get(id=job.id)


def admin_login_traces(username: str) -> None:
    """What the admin's login records hold of a username: a failed login at
    ``/admin/login/`` (an attempt), and, as if the account had been staff once, an access
    log, a failure log and an attempt's expiry (rows of axes' kept when their settings are on)."""
    response = Client().post("/admin/login/", {"username": username, "password": "a wrong guess"})
    assert response.status_code == 200 and AccessAttempt.objects.filter(username=username.lower()).exists()
    attempt = AccessAttempt.objects.get(username=username.lower())
    AccessAttemptExpiration.objects.create(access_attempt=attempt, expires_at=timezone.now())
    seen = {"ip_address": "127.0.0.1", "user_agent": "a browser", "path_info": "/admin/login/"}
    AccessLog.objects.create(username=username, **seen)
    AccessFailureLog.objects.create(username=username, **seen)


def learner_with_everything(runtime: RuntimeClient, *, tag: str = "x", **user_fields: str) -> Everything:
    """A learner with learning data, settings, usage, a credential, a succeeded job
    of every type (snapshot, result, invocation log, outputs, candidates, published
    questions and cards, notices), a failed job and its rerun, a cancelled and a
    pending job, a snapshot a rebuild replaced, the admin's records of a login, and a
    session of the user API whose first refresh token a refresh used up."""
    learner = Learner(**user_fields)
    user = learner.user
    admin_login_traces(user.username)
    login = APIClient().post("/auth/token", {"username": user.username, "password": FACTORY_PASSWORD}, format="json")
    assert login.status_code == 200, login.json()
    refreshed = APIClient().post("/auth/token/refresh", {"refresh": login.json()["refresh"]}, format="json")
    assert refreshed.status_code == 200, refreshed.json()
    knowledge_base = KnowledgeBaseFactory(user=user)
    MaterialFactory(knowledge_base=knowledge_base)
    StudyRecordFactory(knowledge_point=KnowledgePointFactory(knowledge_base=knowledge_base))
    LearningProfileFactory(user=user)
    assert learner.patch("/ai/settings", {"timezone": "Asia/Shanghai"}).status_code == 200
    learner.credential()
    # A phone: each notice below writes it a push, and the first is tried (the stand-in drops it).
    phone = {"platform": "ios", "token": format(user.pk, "064x")}
    assert learner.client.post("/ai/devices", phone, format="json").status_code == 201
    everything = Everything(learner=learner)
    for job_type in ALL_TYPES:
        everything.jobs[job_type] = run_job(runtime, create_job(learner, job_type, knowledge_base.id), tag=tag)

    failed = create_job(learner, "learning_state_analysis", knowledge_base.id)
    attempt = runtime.lock(failed.id).json()["attemptNo"]
    assert runtime.fail(failed.id, attempt, "MODEL_RESPONSE_INVALID").json()["status"] == "failed"
    notification_create_for_job(job_id=failed.id)
    everything.failed = AiRuntimeJob.objects.get(id=failed.id)
    everything.rerun = job_rerun(job=everything.failed)

    cancelled = create_job(learner, "weak_point_analysis", knowledge_base.id)
    assert learner.client.post(f"/ai/jobs/{cancelled.id}/cancel").status_code == 200
    everything.cancelled = AiRuntimeJob.objects.get(id=cancelled.id)

    everything.pending = create_job(learner, "next_action_planning", knowledge_base.id)
    # A snapshot past its TTL is rebuilt when fetched; the replaced one is left behind.
    locked = create_job(learner, "learning_state_analysis", knowledge_base.id)
    AiJobSnapshot.objects.filter(id=locked.snapshot_id).update(expires_at=timezone.now())
    runtime.lock(locked.id)
    job_snapshot(job_id=locked.id, instance_id=runtime.instance_id)
    pushed = Delivery.objects.filter(owner_id=str(user.pk)).order_by("created_at").first()
    assert pushed is not None, "a notice writes the learner's phone a push"
    delivery_send(delivery_id=pushed.id)
    return everything


def age_job(job: AiRuntimeJob, *, days: float) -> None:
    """As if the job had finished ``days`` ago (its snapshot made just before, its
    notices sent then)."""
    finished = timezone.now() - dt.timedelta(days=days)
    AiRuntimeJob.objects.filter(id=job.id).update(finished_at=finished, created_at=finished - dt.timedelta(minutes=1))
    AiJobSnapshot.objects.filter(id=job.snapshot_id).update(created_at=finished - dt.timedelta(minutes=1))
    Notification.objects.filter(job_id=job.id).update(created_at=finished)


def age_tokens(user, *, days: float) -> None:
    """As if the user's used-up refresh tokens had expired ``days`` ago."""
    OutstandingToken.objects.filter(user=user).update(expires_at=timezone.now() - dt.timedelta(days=days))


def counters_aged(*, days: list[int], now: dt.datetime | None = None) -> None:
    """One of each counter for each ``days`` ago (of the platform's day, of now). A
    user's day goes once it is that long ago in every time zone: up to a day later
    than the platform's, so the ages below keep a day clear of the limit."""
    now = now or timezone.now()
    user = UserFactory()
    today = platform_day(now)
    for n, ago in enumerate(days):
        day = today - dt.timedelta(days=ago)
        UserAiUsage.objects.create(user=user, local_date=day, api_key_mode=ApiKeyMode.PLATFORM_KEY, job_count=1)
        # get_or_create: a job run today may have counted on this shard already.
        PlatformDailyUsage.objects.get_or_create(day=day, shard=n % 16, defaults={"tokens_used": 10})
        AsynchModelStat.objects.create(day=day, tenant_id="t1", creator="u1", model_name="m1", request_count=2)
        CircuitBreakerEvent.objects.create(
            from_state=CircuitState.CLOSED,
            to_state=CircuitState.OPEN,
            actor="system",
            reason="test",
            created_at=now - dt.timedelta(days=ago, hours=1),
        )
