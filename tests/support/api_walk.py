"""A world where every endpoint has something real to answer with: a learner with
learning data, a credential, a profile, finished jobs of every type with their outputs
and notices, a pending and a failed job, and model-asynch with a model and tasks. For
the tests that walk every operation of the schema (conformance, opaque user ids)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accounts.api.tokens import AccessToken
from accounts.selectors import public_id_of
from ai_jobs import job_types, notifications, services
from asynch import services as asynch_services
from asynch.models import AsynchTask, TaskState
from credentials import services as credential_services
from learning import services as learning
from tests.support.api import RUNTIME_TOKEN
from tests.support.factories import VALID_OUTPUTS, UserFactory, consent

RUNTIME_ID = "walk-runtime"


@dataclass
class World:
    learner: Any
    learner_token: str
    staff_token: str
    tenant_key: str
    runtime_token: str
    ids: dict[str, str]  # path parameter -> a real id to put in it
    public_id: str


def build_world() -> World:
    learner = UserFactory(username="walk-learner", email="walk.learner@example.com")
    consent(learner)
    staff = UserFactory(username="walk-staff", is_staff=True)
    kb = learning.knowledge_base_create(user=learner, name="Fractions", description="Parts of a whole")
    point = learning.knowledge_point_create(user=learner, knowledge_base_id=kb.id, name="Adding", description="1/2+1/4")
    material = learning.material_create(user=learner, knowledge_base_id=kb.id, title="Chapter 1", content="Halves.")
    record = learning.study_record_create(
        user=learner, knowledge_point_id=point.id, is_correct=False, score=40.0, duration_seconds=60
    )
    learning.learning_profile_update(user=learner, goals="Pass", level="beginner", preferred_study_time="evening")
    credential = credential_services.credential_create(user=learner, name="mine", api_key="sk-" + "w" * 32)
    finished: dict[str, str] = {}
    for declared in job_types.all_types():
        on_kb = "user" not in declared.target_types
        job = services.job_submit(
            user=learner,
            job_type=declared.name,
            target_type="knowledge_base" if on_kb else "user",
            target_id=kb.id if on_kb else "me",
        ).job
        locked = services.job_lock(job_id=job.id, instance_id=RUNTIME_ID)
        output = dict(VALID_OUTPUTS[declared.name])
        if declared.name == "next_action_planning":
            me = {**output["recommendations"][0], "targetType": "user", "targetId": public_id_of(learner)}
            output = {"recommendations": [*output["recommendations"], me]}
        services.result_submit(
            job_id=job.id,
            instance_id=RUNTIME_ID,
            attempt_no=locked.attempt_no,
            output_schema_version="v1",
            output=output,
            usage={"promptTokens": 100, "completionTokens": 20},
            cost_cents=0,
        )
        notifications.notification_create_for_job(job_id=job.id)
        finished[declared.name] = job.id
    failed = services.job_submit(user=learner, job_type="learning_state_analysis", target_type="user", target_id="me")
    locked = services.job_lock(job_id=failed.job.id, instance_id=RUNTIME_ID)
    services.job_fail(
        job_id=failed.job.id,
        instance_id=RUNTIME_ID,
        attempt_no=locked.attempt_no,
        error_code="INVALID_SNAPSHOT",
        error_message="x",
    )
    notifications.notification_create_for_job(job_id=failed.job.id)
    pending = services.job_submit(user=learner, job_type="weak_point_analysis", target_type="user", target_id="me")
    to_cancel = services.job_submit(
        user=learner, job_type="learning_state_analysis", target_type="user", target_id="me"
    )

    tenant = asynch_services.tenant_create(name="walk-tenant", is_admin=True)
    tenant_key = asynch_services.tenant_key_create(tenant=tenant).key
    asynch_services.model_create(
        model_name="walk-model", base_url="http://127.0.0.1:9", api_key="API_KEY:walk-secret", timeout_seconds=5
    )
    task = asynch_services.task_create(
        tenant=tenant, model_name="walk-model", request_payload={"q": 1}, biz_name="walk", creator=public_id_of(learner)
    )
    AsynchTask.objects.filter(id=task.id).update(state=TaskState.FAILED, error_message="refused")
    notice = notifications.notification_list(user=learner).first()
    return World(
        learner=learner,
        learner_token=str(AccessToken.for_user(learner)),
        staff_token=str(AccessToken.for_user(staff)),
        tenant_key=tenant_key,
        runtime_token=RUNTIME_TOKEN,
        ids={
            "job_id": pending.job.id,
            "cancel_job": to_cancel.job.id,
            "credential_id": credential.id,
            "notification_id": notice.id if notice else "",
            "knowledge-bases": kb.id,
            "knowledge-points": point.id,
            "materials": material.id,
            "study-records": record.id,
            "taskId": task.id,
            "modelName": "walk-model",
            "finished_job": finished["learning_state_analysis"],
        },
        public_id=public_id_of(learner),
    )
