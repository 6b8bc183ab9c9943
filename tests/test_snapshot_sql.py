"""PostgreSQL's snapshot statements (``learning.queries``) build the document the ORM
builders build (``learning.snapshots.builders``, the embedded default's way), key for
key, for every target type and past every bound; in two statements (the learner's
timezone, the document); stored and sent as the database's own text; and the document
PostgreSQL builds is the one SQLite (the ORM) builds for the same data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.selectors import public_id_of
from ai_jobs.models import AiJobSnapshot
from ai_jobs.snapshots import build_data, snapshot_create
from learning.snapshots import learner_timezone, orm_document, sql_document
from tests.support.snapshots import (
    TARGETS,
    TARGETS_PAST_EVERY_BOUND,
    documents,
    load,
    load_past_every_bound,
)

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's statements run on PostgreSQL only")


def _both(user, target_type: str, target_id: str) -> tuple[dict, dict]:
    """The document of PostgreSQL's statement and of the ORM builder, for the same moment."""
    context = {"learner": {"userId": public_id_of(user)}, "tz": learner_timezone(user), "now": timezone.now()}
    sql = sql_document(user, target_type, target_id, **context)
    orm = orm_document(user, target_type, target_id, **context)
    return json.loads(sql), json.loads(orm)


@pytest.mark.parametrize(("target_type", "target_id"), TARGETS, ids=[f"{t}:{i}" for t, i in TARGETS])
def test_postgresqls_statement_builds_the_document_the_orm_builders_build(postgresql, target_type, target_id):
    sql, orm = _both(load(), target_type, target_id)
    assert list(sql) == list(orm)  # the same keys, in the same order
    assert sql == orm


@pytest.mark.parametrize(
    ("target_type", "target_id"), TARGETS_PAST_EVERY_BOUND, ids=[f"{t}:{i}" for t, i in TARGETS_PAST_EVERY_BOUND]
)
def test_postgresqls_statement_and_the_orm_builders_cut_the_same_past_every_bound(postgresql, target_type, target_id):
    sql, orm = _both(load_past_every_bound(), target_type, target_id)
    assert sql == orm
    cut = [key for key, value in sql.items() if key.endswith("Truncated") and value]
    assert cut, "the data is past the bounds of this target's lists"


def test_the_document_is_two_statements_whatever_the_target(postgresql):
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


def test_postgresql_and_sqlite_build_the_same_document_for_the_same_data(postgresql, tmp_path):
    here = {"load": documents(load(), TARGETS), "past": documents(load_past_every_bound(), TARGETS_PAST_EVERY_BOUND)}
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "METRICS_REDIS_URL")},
        "DATABASE_URL": f"sqlite:///{tmp_path / 'same.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "CELERY_BROKER_URL": "memory://",
    }
    script = "import django; django.setup(); from tests.support.snapshots import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    there = json.loads(done.stdout)
    assert there.keys() == here.keys()
    for learner, targets in here.items():
        assert there[learner].keys() == targets.keys()
        for target, document in targets.items():
            assert there[learner][target] == document, f"{learner} {target}"
