"""The snapshot document assembled by the database (``learning.snapshots.sql``) is the
one learning/SNAPSHOT.md describes: the same, key for key, as the ORM reference
builders give, and the same on PostgreSQL and on SQLite (the embedded default) for
the same data; built in two statements; stored and sent as the database's text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.selectors import public_id_of
from ai_jobs.models import AiJobSnapshot
from ai_jobs.snapshots import build_data, snapshot_create
from learning.snapshots import BUILDERS
from tests.snapshot_support import TARGETS, documents, load, without_time

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.django_db]


@pytest.mark.embedded
@pytest.mark.parametrize(("target_type", "target_id"), TARGETS, ids=[f"{t}:{i}" for t, i in TARGETS])
def test_the_database_builds_the_document_the_reference_builders_give(target_type, target_id):
    user = load()
    reference = {
        "learner": {"userId": public_id_of(user)},
        "target": {"type": target_type, "id": target_id},
        **BUILDERS[target_type](user, target_id),
    }
    assert without_time(build_data(user=user, target_type=target_type, target_id=target_id)) == without_time(reference)


@pytest.mark.embedded
def test_the_document_is_two_statements_whatever_the_target():
    user = load()
    for target_type, target_id in TARGETS:
        with CaptureQueriesContext(connection) as queries:
            build_data(user=user, target_type=target_type, target_id=target_id)
        assert len(queries) == 2, [q["sql"][:80] for q in queries.captured_queries]  # the timezone, the document


@pytest.mark.embedded
def test_a_stored_snapshot_is_the_databases_text_and_reads_back_as_the_document():
    user = load()
    created = snapshot_create(user=user, target_type="knowledge_base", target_id="kb_algebra")
    assert json.loads(created.payload_text) == AiJobSnapshot.objects.get(id=created.id).payload
    assert created.payload["knowledgeBase"]["id"] == "kb_algebra"  # read back when asked for


def test_postgresql_and_sqlite_build_the_same_document_for_the_same_data(tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("compares this run's PostgreSQL with a SQLite database of its own")
    here = documents(load())
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "METRICS_REDIS_URL")},
        "DATABASE_URL": f"sqlite:///{tmp_path / 'same.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "CELERY_BROKER_URL": "memory://",
    }
    script = "import django; django.setup(); from tests.snapshot_support import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    there = json.loads(done.stdout)
    assert there.keys() == here.keys()
    for target, document in here.items():
        assert there[target] == document, target
