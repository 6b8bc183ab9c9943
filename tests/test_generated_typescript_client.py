"""The TypeScript client generated from ``/api/schema`` (openapi-typescript types for
openapi-fetch, compiled by ``tsc --strict``) drives the live server through the same
trips as the Python client: a learner's, a runtime's, a model-asynch tenant's and an
admin's. The program says what it means without casts or ``any``; a generator warning
about the schema fails the test."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator

import pytest
from django.db import connection

from tests.support.asynch_fixtures import ModelServer, model_server_fixture, run_queue  # noqa: F401
from tests.support.generated_clients import (  # noqa: F401  (fixtures)
    PASSWORD,
    RUNTIME_TOKEN,
    TS_SOURCES,
    TypeScriptTypes,
    compile_and_run,
    run_suffix,
    schema_fixture,
    server_fixture,
    tenant_key,
    typescript_types_fixture,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@contextlib.contextmanager
def model_asynch_worker() -> Iterator[None]:
    """A model-asynch worker for the trips: the queue run in a thread of this process,
    on the database the server serves, until the trip is over."""
    stop = threading.Event()

    def work() -> None:
        try:
            while not stop.is_set():
                run_queue()
                stop.wait(0.05)
        finally:
            connection.close()

    thread = threading.Thread(target=work, name="model-asynch-worker", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


def test_the_typescript_generator_takes_the_schema_without_a_warning(typescript_types: TypeScriptTypes):
    assert typescript_types.warnings() == [], typescript_types.output


def test_the_typescript_program_has_no_cast_and_no_any():
    source = (TS_SOURCES / "trips.ts").read_text()
    code = re.sub(r'"(?:\\.|[^"\\\n])*"|`(?:\\.|[^`\\])*`', '""', source)  # strings may say anything
    code = re.sub(r"//[^\n]*|/\*.*?\*/", "", code, flags=re.S)  # and comments
    assert not re.search(r"\bany\b", code), "any"
    assert not re.search(r"\bas\s+(?!const\b)[A-Za-z{(\[]", code), "a cast (as T)"
    assert not re.search(r"[\w)\]]!(?!=)", code), "a non-null assertion (x!)"
    assert "@ts-" not in source and "eslint-disable" not in source


def test_a_learner_a_runtime_a_tenant_and_an_admin_through_the_generated_typescript_client(
    server: str, typescript_types: TypeScriptTypes, model_server: ModelServer
):
    suffix = run_suffix()
    with model_asynch_worker():
        output = compile_and_run(
            typescript_types,
            {
                "API_URL": server,
                "RUN_SUFFIX": suffix,
                "PASSWORD": PASSWORD,
                "RUNTIME_TOKEN": RUNTIME_TOKEN,
                "ADMIN_TENANT_KEY": tenant_key(f"gen-ts-admin-{suffix}", is_admin=True),
                "TENANT_KEY": tenant_key(f"gen-ts-tenant-{suffix}", is_admin=False),
                "MODEL_BASE_URL": model_server.url,
            },
        )
    assert output.strip().endswith("trips done"), output
