"""The runtime's write path in few statements: the result transaction in a bounded
number of statements per job type, usage, budget and breaker in one of them,
invocation logs in one, the notice a row of the job's own final transaction, and its
pushes one more (one ``INSERT ... SELECT`` over the user's devices, however many), and
none for a user without a device that takes pushes.
Counted with ``CaptureQueriesContext``: these fail when the counts grow. The logs sent with the result (``invocationLogs``) are stored as
``invocation-logs`` stores them, in the result's transaction."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ai_jobs import services
from ai_jobs.models import AiInvocationLog, AiRuntimeJob, AiRuntimeResult, Notification
from delivery.models import Delivery
from delivery.services import devices
from quotas.models import PlatformCircuitBreaker, PlatformDailyUsage, UserAiUsage
from tests.support.api import RuntimeClient, error_code
from tests.support.factories import VALID_OUTPUTS, JobFactory
from tests.support.learning_factories import KnowledgeBaseFactory, KnowledgePointFactory
from tests.support.outputs import kb_job, quiz

pytestmark = pytest.mark.django_db

ANALYSES = ["learning_state_analysis", "weak_point_analysis", "next_action_planning"]


def postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("counts PostgreSQL's statements")


def statements(captured: CaptureQueriesContext) -> list[str]:
    """What the database was sent, less the savepoints of the test's own wrapping
    transaction (in production the result's transaction is the outermost one: BEGIN
    and COMMIT, which Django does not log either)."""
    return [q["sql"] for q in captured.captured_queries if "SAVEPOINT" not in q["sql"]]


def held(job: AiRuntimeJob, instance: str = "runtime-1") -> int:
    return services.job_lock(job_id=job.id, instance_id=instance).attempt_no


def submit(job: AiRuntimeJob, output: dict, attempt: int, **extra) -> services.SubmittedResult:
    return services.result_submit(
        job_id=job.id,
        instance_id="runtime-1",
        attempt_no=attempt,
        output_schema_version="v1",
        output=output,
        usage={"promptTokens": 10, "completionTokens": 5},
        cost_cents=Decimal("0.5"),
        **extra,
    )


def log(attempt: int, request_id: str, **fields) -> dict:
    return {"attempt_no": attempt, "provider": "deepseek", "model_name": "deepseek-chat", "request_id": request_id,
            "prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10, "cost_cents": Decimal("0.25"), **fields}  # fmt: skip


def analysis_output(job_type: str, knowledge_point_id: str, knowledge_base_id: str) -> dict:
    """The type's valid output, naming the user's objects wherever it can: the worst case."""
    output = dict(VALID_OUTPUTS[job_type])
    if job_type == "weak_point_analysis":
        output["weakPoints"] = [{**entry, "knowledgePointId": knowledge_point_id} for entry in output["weakPoints"]]
    if job_type == "next_action_planning":
        output["recommendations"] = [
            {**entry, "targetType": kind, "targetId": target}
            for entry in output["recommendations"]
            for kind, target in (
                ("knowledge_point", knowledge_point_id),
                ("knowledge_base", knowledge_base_id),
                ("user", "me"),
            )
        ]
    return output


@pytest.mark.parametrize("job_type", ANALYSES)
def test_an_analysis_result_is_seven_statements_at_most(job_type):
    postgres_only()
    knowledge_base = KnowledgeBaseFactory()
    point = KnowledgePointFactory(knowledge_base=knowledge_base)
    PlatformCircuitBreaker.objects.create(id=1)
    devices.device_register(user_id=knowledge_base.user.id, platform="android", token="fcm-" + "t" * 40)
    job = JobFactory(user=knowledge_base.user, job_type=job_type, quota_date=timezone.now().date())
    attempt = held(job)
    with CaptureQueriesContext(connection) as captured:
        submitted = submit(job, analysis_output(job_type, point.id, knowledge_base.id), attempt)
    sqls = statements(captured)
    assert len(sqls) <= 7, sqls
    assert sum("INSERT INTO delivery " in sql for sql in sqls) == 1  # the notice's pushes
    assert Delivery.objects.filter(event_id__in=Notification.objects.filter(job_id=job.id).values("id")).count() == 1
    assert not submitted.duplicate and Notification.objects.filter(job_id=job.id).count() == 1
    # Usage, budget and breaker were one of them, and counted.
    assert UserAiUsage.objects.get(user=job.user).tokens_used == 15
    assert sum(PlatformDailyUsage.objects.values_list("tokens_used", flat=True)) == 15


@pytest.mark.parametrize("has_device", ["none", "disabled"])
def test_a_learner_without_a_device_that_takes_pushes_costs_the_result_no_push_statement(has_device):
    postgres_only()
    job = JobFactory(job_type="learning_state_analysis", quota_date=timezone.now().date())
    if has_device == "disabled":
        device, _ = devices.device_register(user_id=job.user_id, platform="android", token="fcm-" + "d" * 40)
        devices.device_disable(device_id=device.id, reason="unregistered")
    attempt = held(job)
    with CaptureQueriesContext(connection) as captured:
        submit(job, dict(VALID_OUTPUTS["learning_state_analysis"]), attempt)
    sqls = statements(captured)
    assert not [sql for sql in sqls if "INSERT INTO delivery " in sql], sqls
    assert len(sqls) <= 6, sqls
    assert Notification.objects.filter(job_id=job.id).count() == 1 and not Delivery.objects.exists()


@pytest.mark.parametrize("job_type", ["quiz_generation", "flashcard_generation"])
def test_a_generation_result_is_ten_statements_at_most(job_type):
    postgres_only()
    knowledge_base = KnowledgeBaseFactory()
    point = KnowledgePointFactory(knowledge_base=knowledge_base)
    PlatformCircuitBreaker.objects.create(id=1)
    if job_type == "quiz_generation":
        first, second = quiz("Is 0 even?"), quiz("is 0 even", "Is 1 odd?", knowledgePointId=point.id)
    else:
        first = {"flashcards": [{"front": "Numerator", "back": "top"}]}
        second = {"flashcards": [{"front": "numerator", "back": "top", "knowledgePointId": point.id},
                                 {"front": "Denominator", "back": "bottom"}]}  # fmt: skip
    earlier = kb_job(knowledge_base, job_type)
    submit(earlier, first, held(earlier))
    job = kb_job(knowledge_base, job_type)
    AiRuntimeJob.objects.filter(id=job.id).update(quota_date=timezone.now().date())
    attempt = held(job)
    # The worst case: a knowledge point named, a duplicate whose holder must be read.
    with CaptureQueriesContext(connection) as captured:
        submit(job, second, attempt)
    sqls = statements(captured)
    assert len(sqls) <= 10, sqls
    notice = Notification.objects.get(job_id=job.id)
    assert notice.data == {"published": 1, "duplicates": 1}


def test_the_breaker_row_is_written_only_when_it_changes():
    postgres_only()
    PlatformCircuitBreaker.objects.create(id=1)

    def version() -> str:  # PostgreSQL's row version: a new one for every UPDATE, even of equal values
        with connection.cursor() as cursor:
            cursor.execute("SELECT xmin::text FROM quota_platform_circuit_breaker WHERE id = 1")
            return cursor.fetchone()[0]

    before = version()
    job = JobFactory(quota_date=timezone.now().date())
    submit(job, VALID_OUTPUTS["learning_state_analysis"], held(job))
    assert version() == before  # closed with no failures: nothing to write
    PlatformCircuitBreaker.objects.filter(id=1).update(consecutive_failures=2)
    changed = version()
    job = JobFactory(quota_date=timezone.now().date())
    submit(job, VALID_OUTPUTS["learning_state_analysis"], held(job))
    assert version() != changed and PlatformCircuitBreaker.objects.get().consecutive_failures == 0


def test_a_half_open_breaker_closes_and_a_spent_budget_opens_it_from_the_one_statement(settings):
    job = JobFactory(quota_date=timezone.now().date())
    PlatformCircuitBreaker.objects.create(id=1, state="half_open")
    submit(job, VALID_OUTPUTS["learning_state_analysis"], held(job))
    assert PlatformCircuitBreaker.objects.get().state == "closed"
    settings.PLATFORM_DAILY_TOKEN_BUDGET = 20  # this job's 15 tokens and the next one's pass it
    job = JobFactory(quota_date=timezone.now().date())
    submit(job, VALID_OUTPUTS["learning_state_analysis"], held(job))
    breaker = PlatformCircuitBreaker.objects.get()
    assert breaker.state == "open" and "token budget" in breaker.reason


def test_the_invocation_logs_are_one_statement():
    postgres_only()
    job = JobFactory()
    attempt = held(job)
    logs = [log(attempt, "req-1"), log(attempt, "req-2")]
    with CaptureQueriesContext(connection) as captured:
        assert services.invocation_logs_record(job_id=job.id, instance_id="runtime-1", logs=logs) == 2
    assert len(statements(captured)) == 1, statements(captured)
    assert AiInvocationLog.objects.filter(job=job).count() == 2


def test_a_final_failure_its_notice_and_its_pushes_are_three_statements():
    postgres_only()
    job = JobFactory(user__username="learner", api_key_mode="user_deepseek_key")
    attempt = held(job)
    with CaptureQueriesContext(connection) as captured:
        outcome = services.job_fail(
            job_id=job.id, instance_id="runtime-1", attempt_no=attempt, error_code="INVALID_CREDENTIAL",
            error_message="no",
        )  # fmt: skip
    assert outcome.status == "failed" and len(statements(captured)) == 3, statements(captured)
    assert Notification.objects.get(job_id=job.id).data == {"errorCode": "INVALID_CREDENTIAL"}


def test_a_platform_model_failure_counts_for_the_breaker_in_one_more_statement():
    postgres_only()
    PlatformCircuitBreaker.objects.create(id=1)
    job = JobFactory(max_retry_count=0)
    attempt = held(job)
    with CaptureQueriesContext(connection) as captured:
        services.job_fail(
            job_id=job.id, instance_id="runtime-1", attempt_no=attempt, error_code="MODEL_TIMEOUT", error_message="slow"
        )
    assert len(statements(captured)) == 4, statements(captured)  # the move, the notice, its pushes, the breaker's count
    assert PlatformCircuitBreaker.objects.get().consecutive_failures == 1


# --- invocationLogs with the result, on both databases ------------------------------------------


@pytest.mark.embedded
def test_logs_sent_with_the_result_are_stored_and_every_call_counts(runtime: RuntimeClient):
    job = JobFactory(quota_date=timezone.now().date())
    attempt = runtime.lock(job.id).json()["attemptNo"]
    logs = [
        {"attemptNo": attempt, "requestId": "r-failed", "totalTokens": 100, "costCents": "1.5",
         "errorCode": "MODEL_JSON_PARSE_FAILED", "startedAt": "2026-01-01T00:00:00Z", "latencyMs": 12},
        {"attemptNo": attempt, "requestId": "r-ok", "totalTokens": 30, "costCents": "0.5", "httpStatus": 200},
    ]  # fmt: skip
    body = {"usage": {"promptTokens": 20, "completionTokens": 10}, "costCents": "0.5", "invocationLogs": logs}
    response = runtime.result(job.id, attempt, VALID_OUTPUTS["learning_state_analysis"], **body)
    assert response.status_code == 200, response.json()
    stored = {row.request_id: row for row in AiInvocationLog.objects.filter(job=job)}
    assert set(stored) == {"r-failed", "r-ok"} and stored["r-failed"].latency_ms == 12
    assert stored["r-ok"].http_status == 200 and stored["r-ok"].runtime_instance_id == "runtime-1"
    # The accepted call counts through the result (30), the failed one through its log (100).
    usage = UserAiUsage.objects.get(user=job.user)
    assert usage.tokens_used == 130 and usage.cost_cents == Decimal("2.0")
    assert sum(PlatformDailyUsage.objects.values_list("tokens_used", flat=True)) == 130

    again = runtime.result(job.id, attempt, VALID_OUTPUTS["learning_state_analysis"], **body)
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert AiInvocationLog.objects.filter(job=job).count() == 2  # nothing stored twice
    assert UserAiUsage.objects.get(user=job.user).tokens_used == 130


@pytest.mark.embedded
def test_invalid_logs_with_the_result_are_a_400_naming_the_field_and_store_nothing(runtime: RuntimeClient):
    job = JobFactory()
    attempt = runtime.lock(job.id).json()["attemptNo"]
    output = VALID_OUTPUTS["learning_state_analysis"]
    shape = runtime.result(job.id, attempt, output, invocationLogs=[{"attemptNo": "one"}])
    assert shape.status_code == 400 and error_code(shape) == "VALIDATION_ERROR"
    assert "invocationLogs" in shape.json()["error"]["fields"]
    later = runtime.result(job.id, attempt, output, invocationLogs=[{"attemptNo": attempt + 1, "requestId": "x"}])
    assert later.status_code == 400 and error_code(later) == "VALIDATION_ERROR"
    assert "invocationLogs" in later.json()["error"]["fields"]
    assert AiRuntimeJob.objects.get(id=job.id).status == "locked"  # rolled back: the job is still held
    assert not AiRuntimeResult.objects.filter(job=job).exists() and not AiInvocationLog.objects.exists()
    assert not Notification.objects.exists()
    assert runtime.result(job.id, attempt, output, invocationLogs=[]).status_code == 200


# --- the notice is seen when the final transaction commits ---------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_notice_is_seen_by_others_only_once_the_result_commits():
    postgres_only()
    job = JobFactory(quota_date=timezone.now().date())
    attempt = held(job)
    seen: list[int] = []

    def count_elsewhere() -> None:  # another connection, as the user's API would read
        try:
            seen.append(Notification.objects.filter(job_id=job.id).count())
        finally:
            connection.close()

    with transaction.atomic():
        submit(job, VALID_OUTPUTS["learning_state_analysis"], attempt)
        assert Notification.objects.filter(job_id=job.id).count() == 1  # in the result's transaction
        reader = threading.Thread(target=count_elsewhere)
        reader.start()
        reader.join(timeout=30)
    reader = threading.Thread(target=count_elsewhere)
    reader.start()
    reader.join(timeout=30)
    assert seen == [0, 1]


@pytest.mark.embedded
def test_the_schema_documents_invocation_logs_on_the_result(client):
    schema = client.get("/api/schema", HTTP_ACCEPT="application/json").json()
    body = schema["paths"]["/internal/runtime/jobs/{job_id}/result"]["post"]["requestBody"]["content"]
    ref = body["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    logs = schema["components"]["schemas"][ref]["properties"]["invocationLogs"]
    assert logs["type"] == "array" and logs["items"]["$ref"].endswith("/InvocationLogRequest")
    assert "invocationLogs" not in schema["components"]["schemas"][ref].get("required", [])


def test_a_claim_reads_nothing_but_its_one_statement(runtime: RuntimeClient):
    """The claimed jobs carry only the columns their body and sort need; rendering them
    loads no other (a deferred field read would be another statement on the job table)."""
    postgres_only()
    jobs = JobFactory.create_batch(3)
    with CaptureQueriesContext(connection) as captured:
        answer = runtime.claim(limit=10)
    assert answer.status_code == 200
    assert {job["jobId"] for job in answer.json()["jobs"]} == {job.id for job in jobs}
    on_jobs = [sql for sql in statements(captured) if "ai_runtime_job" in sql]
    assert len(on_jobs) == 1, on_jobs
    assert on_jobs[0].startswith("WITH picked")


def test_a_results_writes_are_plain_statements_in_order():
    """The job's move, the result, its analysis, the notice, its pushes, the usage: each
    its own statement, sent as it runs, so each sees the rows written before it."""
    postgres_only()
    PlatformCircuitBreaker.objects.create(id=1)
    job = JobFactory(job_type="learning_state_analysis", quota_date=timezone.now().date())
    devices.device_register(user_id=job.user_id, platform="ios", token="ab" * 32)
    attempt = held(job)
    with CaptureQueriesContext(connection) as captured:
        submit(job, dict(VALID_OUTPUTS["learning_state_analysis"]), attempt)
    sqls = statements(captured)
    assert [sql.split("(")[0].split(" SET")[0].strip() for sql in sqls[1:5]] == [
        "INSERT INTO ai_runtime_result",
        "INSERT INTO ai_learning_analysis",
        "INSERT INTO ai_notification",
        "INSERT INTO delivery",
    ], sqls
    assert sqls[0].startswith("UPDATE ai_runtime_job") and len(sqls) == 6, sqls
    assert AiRuntimeResult.objects.filter(job_id=job.id).count() == 1
    assert Notification.objects.filter(job_id=job.id).count() == 1
