"""A canary key pushed through every door: create, update, the provider test (the
provider answering 200, 401 and 500), a validation error, the runtime's resolve, the
admin list, change page and test action, a server error and deletion. Its clear text
may appear only in the resolve answer to the lock holder and in the requests that
sent it (to our API and to the provider). Every response body and header, every log
record (SQL included), the exception report of the server error, the outbox, every
Celery message and the stored row are searched for it."""

from __future__ import annotations

import io
import json
import logging
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from celery.signals import before_task_publish
from django.core import mail
from django.db import connection
from django.test import Client, RequestFactory
from django.views.debug import ExceptionReporter

from accounts.api.tokens import AccessToken
from ai_jobs.models import AiRuntimeJob
from config.observability.logging import ContextFilter, JsonFormatter, TextFormatter
from credentials import crypto
from tests.support.api import RuntimeClient, error_code
from tests.support.credentials import (  # noqa: F401  (fixtures)
    Provider,
    client_for,
    encryption_keys_fixture,
    provider_fixture,
    provider_server_fixture,
    url,
)
from tests.support.factories import UserFactory, consent

pytestmark = [pytest.mark.django_db, pytest.mark.embedded, pytest.mark.usefixtures("encryption_keys")]


@pytest.fixture
def sql_and_debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every record at DEBUG, including each SQL statement with its parameters."""
    for name in ("", "django", "django.db.backends", "django.request", "urllib3"):
        caplog.set_level(logging.DEBUG, logger=name)
    forced = connection.force_debug_cursor
    connection.force_debug_cursor = True
    yield caplog
    connection.force_debug_cursor = forced


@pytest.fixture
def formatted_logs() -> Iterator[dict[str, io.StringIO]]:
    """Every record as the console handler writes it, in each LOG_FORMAT."""
    streams = {"text": io.StringIO(), "json": io.StringIO()}
    handlers = []
    for name, formatter in (("text", TextFormatter()), ("json", JsonFormatter())):
        handler = logging.StreamHandler(streams[name])
        handler.setFormatter(formatter)
        handler.addFilter(ContextFilter())
        logging.getLogger().addHandler(handler)
        handlers.append(handler)
    yield streams
    for handler in handlers:
        logging.getLogger().removeHandler(handler)


@pytest.fixture
def celery_messages() -> Iterator[list[str]]:
    published: list[str] = []

    def record(sender: Any = None, body: Any = None, headers: Any = None, **kwargs: Any) -> None:
        published.append(repr((sender, body, headers)))

    before_task_publish.connect(record, weak=False)
    yield published
    before_task_publish.disconnect(record)


def _text(response: Any) -> str:
    return response.content.decode(errors="replace") + repr(sorted(response.items()))


def _record_text(record: logging.LogRecord) -> str:
    text = record.getMessage() + repr(vars(record))
    if record.exc_info:
        text += logging.Formatter().formatException(record.exc_info)
    return text


def test_a_canary_key_leaves_in_clear_only_to_the_lock_holder(
    user,
    provider: Provider,
    runtime: RuntimeClient,
    other_runtime: RuntimeClient,
    sql_and_debug_logs,
    formatted_logs,
    celery_messages,
    monkeypatch,
):
    first, second, third = (f"sk-canary{secrets.token_hex(12)}" for _ in range(3))
    canaries = (first, second, third)
    consent(user)
    client = client_for(user)
    seen: list[tuple[str, str]] = []  # (what, everything the client got back)

    def keep(what: str, response: Any, status: int) -> Any:
        assert response.status_code == status, (what, response.status_code, response.content[:300])
        seen.append((what, _text(response)))
        return response

    created = keep("create", client.post(url(), {"name": "canary", "apiKey": first}, format="json"), 201).json()
    cred_id = created["id"]
    assert created["maskedKey"] == f"sk-****{first[-4:]}"
    keep("list", client.get(url()), 200)
    keep("detail", client.get(url(cred_id)), 200)
    keep("test 200", client.post(url(cred_id, "test")), 200)

    keep("update", client.put(url(cred_id), {"name": "canary 2", "apiKey": second}, format="json"), 200)
    provider.status = 401
    assert keep("test 401", client.post(url(cred_id, "test")), 200).json()["httpStatus"] == 401
    provider.status = 500
    assert keep("test 500", client.post(url(cred_id, "test")), 200).json()["httpStatus"] == 500
    keep("bad update", client.put(url(cred_id), {"apiKey": second + " trailing words"}, format="json"), 400)

    # POST /ai/jobs names the credential by id: its answer must not carry the key,
    # and the job it makes is the one the runtime resolves.
    job_body = {
        "jobType": "learning_state_analysis",
        "targetType": "user",
        "targetId": "me",
        "apiKeyMode": "user_deepseek_key",
        "credentialId": cred_id,
        "idempotencyKey": "canary",
    }
    answer = keep("create job", client.post("/ai/jobs", job_body, format="json"), 201)
    job = AiRuntimeJob.objects.get(id=answer.json()["jobId"])

    # The runtime's resolve: the holder gets the key, anyone else does not.
    keep("lock", runtime.lock(job.id), 200)
    keep("resolve by another runtime", other_runtime.post(f"jobs/{job.id}/credential"), 409)
    resolved = runtime.post(f"jobs/{job.id}/credential")
    assert resolved.status_code == 200 and resolved.json()["apiKey"] == second

    # The admin: list, change page, and the test action.
    admin = Client()
    admin.force_login(UserFactory(is_staff=True, is_superuser=True))
    keep("admin list", admin.get("/admin/credentials/credential/"), 200)
    keep("admin change", admin.get(f"/admin/credentials/credential/{cred_id}/change/"), 200)
    provider.status = 200
    action = {"action": "test_credentials", "_selected_action": [cred_id]}
    keep("admin test action", admin.post("/admin/credentials/credential/", action, follow=True), 200)

    # A server error while the request carries a new key.
    def failing_seal(plaintext: str, **kwargs: Any) -> crypto.Sealed:
        raise RuntimeError("simulated storage failure")

    monkeypatch.setattr(crypto, "seal", failing_seal)
    crashed = keep("server error", client.put(url(cred_id), {"apiKey": third}, format="json"), 500)
    assert error_code(crashed) == "INTERNAL_ERROR"
    monkeypatch.undo()

    keep("delete", client.delete(url(cred_id)), 204)
    keep("resolve after delete", runtime.post(f"jobs/{job.id}/credential"), 404)

    # --- where the canaries may be: only the holder's resolve and the requests that sent them
    for what, text in seen:
        for canary in canaries:
            assert canary not in text, f"the key leaked in the answer to {what}"
    assert [auth for path, auth in provider.seen] == [f"Bearer {first}"] + [f"Bearer {second}"] * 3
    assert {path for path, auth in provider.seen} == {"/models"}

    records = sql_and_debug_logs.records
    assert any(r.name == "django.db.backends" for r in records), "SQL was not captured"
    assert any(r.name == "django.request" and r.levelno >= logging.ERROR for r in records)
    for record in records:
        text = _record_text(record)
        for canary in canaries:
            assert canary not in text, f"the key leaked in a log record of {record.name}: {record.getMessage()[:200]}"

    # The same records as written to the console, in both formats: one JSON object per
    # line, each line of a request with its id, and no key in either.
    json_lines = formatted_logs["json"].getvalue().splitlines()
    assert json_lines and formatted_logs["text"].getvalue()
    parsed = [json.loads(line) for line in json_lines]  # a traceback stays inside its line's object
    assert any(line.get("exception") for line in parsed)
    assert any(line.get("requestId") and line["logger"] == "django.request" for line in parsed)
    for name, stream in formatted_logs.items():
        for canary in canaries:
            assert canary not in stream.getvalue(), f"the key leaked in the {name} log output"

    # The exception report an error e-mail or a DEBUG page would show for the crash.
    crash = next(r for r in records if r.name == "config.errors" and r.exc_info)
    request = RequestFactory().put(
        url(cred_id),
        data=json.dumps({"apiKey": third}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {AccessToken.for_user(user)}",
    )
    reporter = ExceptionReporter(request, *crash.exc_info)
    for report in (reporter.get_traceback_text(), reporter.get_traceback_html()):
        assert "simulated storage failure" in report and "********************" in report
        for canary in canaries:
            assert canary not in report

    for message in mail.outbox:
        assert not any(canary in message.body or canary in message.subject for canary in canaries)
    for message in celery_messages:
        assert not any(canary in message for canary in canaries)

    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM ai_model_credential")
        rows = cursor.fetchall()
    stored = b"".join(bytes(v) if isinstance(v, bytes | memoryview) else str(v).encode() for row in rows for v in row)
    assert rows and cred_id.encode() in stored
    for canary in canaries:
        assert canary.encode() not in stored
