"""Request ids and the two log formats: the caller's well-formed
``X-Request-ID`` back, a new one otherwise, on every line the request causes; one
JSON object per line with the fields docs/operations/metrics.md lists; keys and tokens masked in both."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from django.test import Client

from config.observability import context
from config.observability.logging import ContextFilter, JsonFormatter, TextFormatter, logging_config
from config.observability.redact import redact
from quotas.models import UserAiSettings
from tests.support.api import RuntimeClient
from tests.support.factories import JobFactory

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


@pytest.fixture
def lines() -> Iterator[dict[str, io.StringIO]]:
    """Everything logged, as the console handler would write it in each format."""
    streams = {"json": io.StringIO(), "text": io.StringIO()}
    handlers = []
    for name, formatter in (("json", JsonFormatter()), ("text", TextFormatter())):
        handler = logging.StreamHandler(streams[name])
        handler.setFormatter(formatter)
        handler.addFilter(ContextFilter())
        handlers.append(handler)
        logging.getLogger().addHandler(handler)
    yield streams
    for handler in handlers:
        logging.getLogger().removeHandler(handler)


@pytest.mark.parametrize(
    ("given", "kept"),
    [("abc-123", True), ("0b7f0a4e-5d3c-4c8e-9b1a-2f6e8d9c0a1b", True), ("trace:01J.x_y", True), ("x" * 128, True),
     ("x" * 129, False), ("has space", False), ("new\nline", False), ("", False), ("ünïcode", False)],
)  # fmt: skip
def test_a_well_formed_request_id_comes_back_and_any_other_is_replaced(given, kept):
    response = Client().get("/healthz", HTTP_X_REQUEST_ID=given)
    if kept:
        assert response["X-Request-ID"] == given
    else:
        assert re.fullmatch(r"[0-9a-f]{32}", response["X-Request-ID"])


def test_every_line_of_a_request_carries_its_request_id_job_and_runtime(lines, settings):
    settings.LOG_FORMAT = "json"
    job = JobFactory()
    runtime = RuntimeClient("runtime-7")
    runtime.client.credentials(
        HTTP_AUTHORIZATION="Bearer test-runtime-token-0123456789abcdef",
        HTTP_X_RUNTIME_INSTANCE_ID="runtime-7",
        HTTP_X_REQUEST_ID="abc-123",
    )
    assert runtime.lock(job.id).status_code == 200
    UserAiSettings.objects.filter(user=job.user).update(ai_analysis_enabled=False)  # consent withdrawn
    # The job is cancelled (a line of the service's) and the runtime told so with a 409.
    assert runtime.get(f"jobs/{job.id}/snapshot").status_code == 409
    records = [json.loads(line) for line in lines["json"].getvalue().splitlines()]
    mine = [r for r in records if r.get("requestId") == "abc-123"]
    assert mine and all(r["jobId"] == job.id and r["runtimeInstanceId"] == "runtime-7" for r in mine)
    assert any("withdrew consent" in r["message"] for r in mine)
    # A 4xx's one line is the server's access line (tests/test_request_log_lines.py): not Django's too.
    assert not any(r["logger"] == "django.request" for r in records)
    for record in records:
        assert {"time", "level", "logger", "message"} <= set(record)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["time"])
    assert "requestId=abc-123" in lines["text"].getvalue() and f"jobId={job.id}" in lines["text"].getvalue()
    assert context.current() == {}  # nothing of the request is left behind


def test_extra_fields_name_what_a_line_concerns_outside_a_request(lines):
    log = logging.getLogger("runtime_worker.job")
    with context.bound(taskId="task_1"):
        log.warning("job %s: lease lost", "job_9", extra={"jobId": "job_9", "runtimeInstanceId": "rt-1"})
    record = json.loads(lines["json"].getvalue().splitlines()[-1])
    assert (record["jobId"], record["runtimeInstanceId"], record["taskId"]) == ("job_9", "rt-1", "task_1")
    assert record["message"] == "job job_9: lease lost" and "requestId" not in record


def test_exceptions_are_one_json_line_and_keys_and_tokens_are_masked_in_both_formats(lines, settings):
    settings.RUNTIME_SERVICE_TOKENS = ["configured-runtime-token-123"]
    log = logging.getLogger("tests.redaction")
    try:
        raise RuntimeError("provider refused sk-live0123456789abcdef")
    except RuntimeError:
        log.exception(
            "calling with Authorization: Bearer eyJhbGciOi.payload.sig and key %s via %s, token %s, file %s",
            "sk-abcdef0123456789", "postgres://app:db-password-1@db:5432/x", "configured-runtime-token-123",
            "/task/download/signed.token:value",
        )  # fmt: skip
    for name in ("json", "text"):
        text = lines[name].getvalue()
        for secret in ("sk-live0123456789abcdef", "sk-abcdef0123456789", "eyJhbGciOi", "db-password-1",
                       "configured-runtime-token-123", "signed.token"):  # fmt: skip
            assert secret not in text, (name, secret)
    [line] = lines["json"].getvalue().splitlines()
    record = json.loads(line)
    assert "RuntimeError" in record["exception"] and "sk-****" in record["exception"]
    assert "Bearer ****" in record["message"] and "postgres://app:****@db" in record["message"]


def test_an_unknown_log_format_is_refused_at_start_up():
    assert logging_config(log_format="json", level="INFO")["handlers"]["console"]["formatter"] == "json"
    with pytest.raises(ValueError, match="LOG_FORMAT"):
        logging_config(log_format="xml", level="INFO")


def test_redact_leaves_ordinary_text_alone():
    text = "job job_01abc failed: MODEL_TIMEOUT after 30s (attempt 2 of 3)"
    assert redact(text) == text


@pytest.mark.parametrize("where", ["an API view", "a page"])
def test_a_request_the_database_could_not_serve_is_one_line_saying_why(
    lines, settings, monkeypatch, admin_client, where
):
    """A 503 of an outage: the warning that names the service that is down, not Django's line too."""
    from django.db import OperationalError

    from ai_jobs import selectors
    from tests.support.api import user_client
    from tests.support.factories import UserFactory

    settings.LOG_FORMAT = "json"

    def down(*args: object, **kwargs: object) -> None:
        raise OperationalError("connection to server at 127.0.0.1 refused")

    if where == "an API view":
        monkeypatch.setattr(selectors, "user_jobs", down)
        answer = user_client(UserFactory()).get("/ai/jobs", HTTP_X_REQUEST_ID="outage-1")
    else:
        monkeypatch.setattr("ops.dashboard.dashboard_context", down)
        admin_client.raise_request_exception = False  # answered as a server would, not raised
        answer = admin_client.get("/admin/ai_jobs/airuntimejob/dashboard/", HTTP_X_REQUEST_ID="outage-1")
    assert answer.status_code == 503 and answer["Retry-After"]
    records = [json.loads(line) for line in lines["json"].getvalue().splitlines()]
    mine = [r for r in records if r.get("requestId") == "outage-1"]
    assert [(r["level"], r["message"].split(",")[0]) for r in mine] == [("WARNING", "Service unavailable")], mine
