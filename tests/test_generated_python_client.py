"""The Python client generated from ``/api/schema`` (openapi-python-client) works against
the live server and loses nothing (the schema is the truth a generated client is built
from): a learner's trip, the runtime's loop with and without ``include``, a model-asynch
tenant's trip and an admin's ``updateModel`` of one field, through gunicorn. Every answer
parses into its documented model with no key left over; after each partial update
(``updateModel``, the learning PATCHes) the object read back has every other field as it
was. A generator warning about the schema fails the test."""

from __future__ import annotations

import json
import re
import time
from typing import Any, get_args, get_type_hints
from urllib.parse import unquote, urlsplit

import attrs
import pytest

from tests.support.asynch_fixtures import ModelServer, model_server_fixture, run_queue  # noqa: F401
from tests.support.factories import VALID_OUTPUTS
from tests.support.generated_clients import (  # noqa: F401  (fixtures)
    PASSWORD,
    RUNTIME_TOKEN,
    SEED_002_JOB,
    SEED_003_MODEL,
    PythonClient,
    python_client_fixture,
    run_suffix,
    schema_fixture,
    server_fixture,
    tenant_key,
    undocumented,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Fields an update changes by itself, besides the one it was asked to change.
TOUCHED = {"updated_at"}


class Py:
    """The generated package, called as its user would: an operation's ``sync_detailed``
    with a client; each answer checked against what the schema documents for it."""

    def __init__(self, generated: PythonClient, url: str) -> None:
        self.generated, self.url, self.m = generated, url, generated.models

    def anonymous(self) -> Any:
        return self.generated.package.Client(base_url=self.url, raise_on_unexpected_status=True)

    def bearer(self, token: str) -> Any:
        return self.generated.package.AuthenticatedClient(
            base_url=self.url, token=token, raise_on_unexpected_status=True
        )

    def tenant(self, key: str) -> Any:
        return self.generated.package.AuthenticatedClient(
            base_url=self.url, token=key, prefix="", auth_header_name="X-Api-Key", raise_on_unexpected_status=True
        )

    def body(self, operation: str, **fields: Any) -> Any:
        """The body the operation documents, with ``fields`` and nothing else given."""
        hint = get_type_hints(self.generated.operations[operation].sync_detailed)["body"]
        (model,) = [option for option in get_args(hint) or (hint,) if attrs.has(option)]  # not its Unset
        return model(**fields)

    def call(self, operation: str, model: type | str, status: int = 200, **kwargs: Any) -> Any:
        answer = self.generated.operations[operation].sync_detailed(**kwargs)
        assert answer.status_code == status, (operation, answer.status_code, answer.content[:1000])
        expected = getattr(self.m, model) if isinstance(model, str) else model
        assert isinstance(answer.parsed, expected), (operation, type(answer.parsed), answer.content[:1000])
        assert not undocumented(answer.parsed), (operation, undocumented(answer.parsed))
        return answer.parsed


def _unchanged(before: Any, after: Any, changed: str) -> None:
    """Every field but ``changed`` (and the update's own timestamp) is what it was."""
    old, new = before.to_dict(), after.to_dict()
    keep = {key for key in old if key != changed and not _is_touched(key)}
    assert {key: new.get(key) for key in keep} == {key: old[key] for key in keep}, changed
    assert old.keys() == new.keys()


def _is_touched(wire_key: str) -> bool:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", wire_key).lower() in TOUCHED


def test_the_python_generator_takes_the_schema_without_a_warning(python_client: PythonClient):
    assert python_client.warnings() == [], python_client.output


def test_a_learner_and_a_runtime_through_the_generated_python_client(server: str, python_client: PythonClient):
    py, m = Py(python_client, server), python_client.models
    anonymous, suffix = py.anonymous(), run_suffix()
    assert py.call("healthz_retrieve", "HealthStatus", client=anonymous).status.value == "ok"
    assert py.call("readyz_retrieve", "Readiness", client=anonymous).status.value == "ok"
    assert "aijobs_queue_jobs" in py.call("metrics_retrieve", str, client=anonymous)

    # The learner: an account, a session, consent.
    username = f"gen-py-{suffix}"
    registered = py.call(
        "auth_register_create", "Registered", 201, client=anonymous,
        body=m.RegisterInRequest(username=username, password=PASSWORD),
    )  # fmt: skip
    pair = py.call(
        "auth_token_create", "TokenPair", client=anonymous,
        body=m.TokenObtainRequest(username=username, password=PASSWORD),
    )  # fmt: skip
    rotated = py.call(
        "auth_token_refresh_create", "Rotated", client=anonymous, body=m.RefreshInRequest(refresh=pair.refresh)
    )
    learner = py.bearer(rotated.access)
    settings = py.call(
        "ai_settings_partial_update", "AiSettings", client=learner,
        body=m.PatchedAiSettingsPatchRequest(ai_analysis_enabled=True),
    )  # fmt: skip
    assert settings.ai_analysis_enabled
    assert py.call("ai_profile_retrieve", "AiProfile", client=learner).user_id == registered.user_id

    # Learning objects, each PATCHed by one field and read back whole.
    kb = py.call(
        "learning_knowledge_bases_create", "KnowledgeBase", 201, client=learner,
        body=m.KnowledgeBaseInRequest(name="Fractions", description="Parts of a whole"),
    )  # fmt: skip
    material = py.call(
        "learning_materials_create", "Material", 201, client=learner,
        body=m.MaterialInRequest(knowledge_base_id=kb.id, title="Chapter 1", content="Halves and quarters."),
    )  # fmt: skip
    point = py.call(
        "learning_knowledge_points_create", "KnowledgePoint", 201, client=learner,
        body=m.KnowledgePointInRequest(knowledge_base_id=kb.id, name="Adding", description="1/2 + 1/4"),
    )  # fmt: skip
    record = py.call(
        "learning_study_records_create", "StudyRecord", 201, client=learner,
        body=m.StudyRecordInRequest(knowledge_point_id=point.id, is_correct=False, score=40.0, duration_seconds=90),
    )  # fmt: skip
    for kind, obj, changed, value in (
        ("knowledge_bases", kb, "name", "Fractions II"),
        ("materials", material, "title", "Chapter One"),
        ("knowledge_points", point, "name", "Adding fractions"),
        ("study_records", record, "score", 55.0),
    ):
        model, operation = type(obj), f"learning_{kind}_partial_update"
        patch = py.body(operation, **{changed: value})
        patched = py.call(operation, model, client=learner, object_id=obj.id, body=patch)
        back = py.call(f"learning_{kind}_retrieve", model, client=learner, object_id=obj.id)
        assert back.to_dict()[changed] == patch.to_dict()[changed] and back.to_dict() == patched.to_dict()
        _unchanged(obj, back, changed)
        assert [item.id for item in py.call(f"learning_{kind}_list", f"Paginated{model.__name__}List",
                                            client=learner).results] == [obj.id]  # fmt: skip

    # Jobs: one for the runtime's seed path, one for its fast path, one it fails, one cancelled.
    def submit(job_type: str, target_type: str, target_id: str) -> Any:
        return py.call(
            "ai_jobs_create", "UserJob", 201, client=learner,
            body=m.JobCreateRequest(job_type=m.JobTypeEnum(job_type), target_type=m.TargetTypeEnum(target_type),
                                    target_id=target_id, api_key_mode=m.ApiKeyModeEnum.PLATFORM_KEY),
        )  # fmt: skip

    # Seed 002's own body (4.2), as written, is a body of the generated client; its knowledge base
    # kb-001 is not this learner's, which the server answers as the schema documents.
    seed = m.JobCreateRequest.from_dict(SEED_002_JOB)
    assert seed.to_dict() == SEED_002_JOB
    answer = python_client.operations["ai_jobs_create"].sync_detailed(client=learner, body=seed)
    assert (answer.status_code, json.loads(answer.content)["error"]["code"]) == (404, "NOT_FOUND")

    analysis = submit("learning_state_analysis", "user", "me")
    quiz = submit("quiz_generation", "knowledge_base", kb.id)
    weak = submit("weak_point_analysis", "user", "me")
    cancelled = submit("next_action_planning", "user", "me")
    assert analysis.status == m.JobStatusEnum.PENDING and quiz.job_type == m.JobTypeEnum.QUIZ_GENERATION
    assert (
        quiz.target_type == m.TargetTypeEnum.KNOWLEDGE_BASE and analysis.api_key_mode == m.ApiKeyModeEnum.PLATFORM_KEY
    )
    assert (
        py.call("ai_jobs_cancel_create", "UserJob", client=learner, job_id=cancelled.job_id).status.value == "cancelled"
    )

    # The runtime, step by step: poll, lock, heartbeat, snapshot, credential, logs, result.
    runtime, me = py.bearer(RUNTIME_TOKEN), f"gen-py-runtime-{suffix}"
    polled = py.call(
        "internal_runtime_jobs_poll_create", "Jobs", client=runtime, x_runtime_instance_id=me,
        body=m.PollRequest(capabilities=["learning_state_analysis"], limit=10),
    )  # fmt: skip
    assert [job.job_id for job in polled.jobs] == [analysis.job_id]
    assert isinstance(polled.jobs[0].status, m.JobStatusEnum) and isinstance(polled.jobs[0].job_type, m.JobTypeEnum)
    lock = py.call(
        "internal_runtime_jobs_lock_create", "Lock", client=runtime, job_id=analysis.job_id, x_runtime_instance_id=me
    )
    assert lock.status == m.JobStatusEnum.LOCKED
    beat = py.call(
        "internal_runtime_jobs_heartbeat_create", "Heartbeat", client=runtime, job_id=analysis.job_id,
        x_runtime_instance_id=me,
    )  # fmt: skip
    assert beat.cancel_requested is False
    snapshot = py.call(
        "internal_runtime_jobs_snapshot_retrieve", "Snapshot", client=runtime, job_id=analysis.job_id,
        x_runtime_instance_id=me,
    )  # fmt: skip
    assert snapshot.job_id == analysis.job_id and snapshot.user_id == registered.user_id
    credential = py.call(
        "internal_runtime_jobs_credential_create", "Credential", client=runtime, job_id=analysis.job_id,
        x_runtime_instance_id=me,
    )  # fmt: skip
    assert credential.api_key_mode == m.ApiKeyModeEnum.PLATFORM_KEY and credential.api_key
    accepted = py.call(
        "internal_runtime_jobs_invocation_logs_create", "Accepted", 201, client=runtime, job_id=analysis.job_id,
        x_runtime_instance_id=me,
        body=m.InvocationLogsInRequest(logs=[m.InvocationLogRequest(
            attempt_no=lock.attempt_no, request_id="r-timeout", total_tokens=12, cost_cents=0.0125,
            error_code="MODEL_TIMEOUT",
        )]),
    )  # fmt: skip
    assert accepted.accepted == 1

    def result(job_id: str, attempt_no: int, job_type: str, **extra: Any) -> Any:
        return py.call(
            "internal_runtime_jobs_result_create", "ResultOut", client=runtime, job_id=job_id,
            x_runtime_instance_id=me,
            body=m.ResultInRequest(
                attempt_no=attempt_no, output=m.ResultInRequestOutput.from_dict(VALID_OUTPUTS[job_type]),
                usage=m.UsageRequest(prompt_tokens=100, completion_tokens=20), cost_cents=0.25, **extra,
            ),
        )  # fmt: skip

    assert result(analysis.job_id, lock.attempt_no, "learning_state_analysis").status.value == "succeeded"

    # The fast path: claim with include, heartbeat, result with its logs.
    claimed = py.call(
        "internal_runtime_jobs_claim_create", "ClaimedJobs", client=runtime, x_runtime_instance_id=me,
        body=m.ClaimRequest(capabilities=["quiz_generation"], limit=5,
                            include=[m.IncludeEnum.SNAPSHOT, m.IncludeEnum.CREDENTIAL]),
    )  # fmt: skip
    (fast,) = claimed.jobs
    assert fast.job_id == quiz.job_id and fast.status == m.JobStatusEnum.RUNNING
    assert isinstance(fast.snapshot, m.Snapshot) and fast.snapshot.job_id == quiz.job_id
    assert isinstance(fast.credential, m.Credential) and fast.snapshot.target_type == m.TargetTypeEnum.KNOWLEDGE_BASE
    py.call(
        "internal_runtime_jobs_heartbeat_create", "Heartbeat", client=runtime, job_id=quiz.job_id,
        x_runtime_instance_id=me,
    )  # fmt: skip
    logs = [m.InvocationLogRequest(attempt_no=fast.attempt_no, request_id="r-ok", total_tokens=120, cost_cents=0.25)]
    assert result(quiz.job_id, fast.attempt_no, "quiz_generation", invocation_logs=logs).duplicate is False

    # A claim without include, then a failure for good.
    (plain,) = py.call(
        "internal_runtime_jobs_claim_create", "ClaimedJobs", client=runtime, x_runtime_instance_id=me,
        body=m.ClaimRequest(capabilities=["weak_point_analysis"], limit=5),
    ).jobs  # fmt: skip
    assert plain.job_id == weak.job_id and plain.status == m.JobStatusEnum.LOCKED
    assert isinstance(plain.snapshot, python_client.package.types.Unset)  # not asked for
    failed = py.call(
        "internal_runtime_jobs_fail_create", "FailOut", client=runtime, job_id=weak.job_id, x_runtime_instance_id=me,
        body=m.FailInRequest(attempt_no=plain.attempt_no, error_code=m.ErrorCodeEnum.INVALID_SCHEMA,
                             error_message="no such shape"),
    )  # fmt: skip
    assert failed.status == m.JobStatusEnum.FAILED

    # The learner reads it all back.
    statuses = {
        job.job_id: job.status for job in py.call("ai_jobs_list", "PaginatedUserJobList", client=learner).results
    }
    assert statuses == {
        analysis.job_id: m.JobStatusEnum.SUCCEEDED,
        quiz.job_id: m.JobStatusEnum.SUCCEEDED,
        weak.job_id: m.JobStatusEnum.FAILED,
        cancelled.job_id: m.JobStatusEnum.CANCELLED,
    }
    done = py.call("ai_jobs_retrieve", "UserJob", client=learner, job_id=weak.job_id)
    assert done.error_code == "INVALID_SCHEMA" and done.finished_at is not None
    (found,) = py.call("ai_analyses_list", "PaginatedAnalysisList", client=learner).results
    assert found.job_id == analysis.job_id and isinstance(found.level, m.LevelEnum)
    assert py.call("ai_quizzes_list", "PaginatedQuizQuestionList", client=learner).results
    for listing, model in (("ai_weak_points_list", "PaginatedWeakPointList"),
                           ("ai_recommendations_list", "PaginatedRecommendationList"),
                           ("ai_flashcards_list", "PaginatedFlashcardList")):  # fmt: skip
        assert py.call(listing, model, client=learner).results == []
    notices = py.call("ai_notifications_list", "PaginatedNotificationList", client=learner).results
    assert {notice.job_id for notice in notices} >= {analysis.job_id, quiz.job_id}
    assert all(isinstance(notice.job_type, m.JobTypeEnum) for notice in notices)
    profile = py.call("ai_profile_retrieve", "AiProfile", client=learner)
    assert profile.usage.platform_key.tokens_used >= 240 and isinstance(profile.usage.platform_key.cost_cents, float)
    assert isinstance(profile.default_api_key_mode, m.ApiKeyModeEnum)


def test_a_tenant_and_an_admin_through_the_generated_python_client(
    server: str, python_client: PythonClient, model_server: ModelServer
):
    py, m, suffix = Py(python_client, server), python_client.models, run_suffix()
    admin = py.tenant(tenant_key(f"gen-py-admin-{suffix}", is_admin=True))
    tenant = py.tenant(tenant_key(f"gen-py-tenant-{suffix}", is_admin=False))
    name = f"gen-py-model-{suffix}"

    created = py.call(
        "model_create_model_create", "ModelConfigOut", 201, client=admin,
        body=m.ModelConfigInRequest(
            model_name=name, base_url=model_server.url, route="/v1/answer", api_key="API_KEY:model-secret",
            max_concurrency=3, queue_limit=50, timeout_seconds=60, retry_times=1, remark="first",
        ),
    )  # fmt: skip
    # An admin changes one field: only that field is sent, and only it changes.
    updated = py.call(
        "model_update_model_create", "ModelConfigOut", client=admin,
        body=py.body("model_update_model_create", model_name=name, remark="second"),
    )  # fmt: skip
    back = py.call("model_get_model_retrieve", "ModelConfigOut", client=admin, model_name=name)
    assert back.remark == "second" and back.to_dict() == updated.to_dict()
    _unchanged(created, back, "remark")
    assert (back.max_concurrency, back.queue_limit, back.timeout_seconds, back.route) == (3, 50, 60, "/v1/answer")
    assert back.api_key != "" and back.api_key == created.api_key  # the key's mask: the key was kept

    # The tenant's trip: createTask, getTaskResult, getTaskBatch, the download.
    listed = py.call("model_list_models_retrieve", "PaginatedModelListItemList", client=tenant).results
    assert [item.model_name for item in listed] == [name]
    task = py.call(
        "task_create_task_create", "TaskCreated", 201, client=tenant,
        body=m.TaskCreateInRequest(model_name=name, request_payload=m.TaskCreateInRequestRequestPayload.from_dict(
            {"question": "1/2 + 1/4?"}), biz_name="generated"),
    )  # fmt: skip
    assert task.state == 0
    run_queue()
    deadline = time.monotonic() + 30
    while (
        state := py.call("task_get_task_result_retrieve", "TaskResult", client=tenant, task_id=task.task_id)
    ).state < 2:
        assert time.monotonic() < deadline, state
        time.sleep(0.1)
    assert state.state == 2 and state.error_message is None
    (picked,) = py.call(
        "task_get_task_batch_create", "BatchOut", client=tenant, body=m.TaskBatchInRequest(task_ids=[task.task_id])
    ).results
    assert picked.task_id == task.task_id and picked.state == 4 and isinstance(picked.oss_file, str)
    token = unquote(urlsplit(picked.oss_file).path.rsplit("/", 1)[1])
    downloaded = py.call("task_download_retrieve", python_client.package.types.File, client=py.anonymous(), token=token)
    assert json.loads(downloaded.payload.read()) == {"echo": {"question": "1/2 + 1/4?"}, "query": {}}
    (stat,) = py.call("model_stats_retrieve", "PaginatedStatList", client=tenant).results
    assert (stat.model_name, stat.request_count) == (name, 1)

    # Seed 003's own createModel body (its baseUrl the stand-in's), as written.
    seed = m.ModelConfigInRequest.from_dict({**SEED_003_MODEL, "baseUrl": model_server.url})
    assert seed.to_dict() == {**SEED_003_MODEL, "baseUrl": model_server.url}
    seeded = py.call("model_create_model_create", "ModelConfigOut", 201, client=admin, body=seed)
    assert (seeded.model_name, seeded.retry_queue_max_seconds, seeded.enabled) == ("model-service", 600, 1)

    spare = f"gen-py-spare-{suffix}"
    py.call("model_create_model_create", "ModelConfigOut", 201, client=admin,
            body=m.ModelConfigInRequest(model_name=spare, base_url=model_server.url))  # fmt: skip
    deleted = py.call("model_delete_model_create", "Deleted", client=admin, body=m.ModelNameRequest(model_name=spare))
    assert deleted.deleted is True
