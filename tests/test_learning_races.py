"""Learning writes racing a delete, on PostgreSQL with real threads (a 500 Schemathesis met
once: DELETE /learning/knowledge-bases/{id} while another request added to it). A child
added while its parent is deleted is a 404 or is deleted with it; the delete always goes
through; nothing is left pointing at a deleted parent."""

from __future__ import annotations

import threading
from collections import Counter
from functools import partial

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from config.errors import DomainError, ErrorCode
from learning import services
from learning.models import KnowledgeBase, KnowledgePoint, Material, StudyRecord

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 8
WRITERS = 4


def _race(delete, *adders) -> Counter[str]:
    """Run ``delete`` against ``WRITERS`` threads adding in a loop; what each call ended as."""
    barrier = threading.Barrier(WRITERS + 1)
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def record(outcome: str) -> None:
        with lock:
            outcomes[outcome] += 1

    def run(calls) -> None:
        try:
            barrier.wait()
            for call in calls:
                try:
                    call()
                    record("ok")
                except DomainError as exc:
                    record(exc.code.name if exc.code == ErrorCode.NOT_FOUND else f"unexpected {exc.code.name}")
                except Exception as exc:  # what the test is looking for
                    record(f"error {type(exc).__name__}: {exc}")
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(adder,)) for adder in adders]
    threads.append(threading.Thread(target=run, args=([delete],)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def test_deleting_a_knowledge_base_while_materials_and_points_are_added_to_it_never_errs():
    user = get_user_model().objects.create_user("racer")
    seen: Counter[str] = Counter()
    for round_no in range(ROUNDS):
        base = services.knowledge_base_create(user=user, name=f"kb {round_no}")
        point = services.knowledge_point_create(user=user, knowledge_base_id=base.id, name="first")
        add_material = partial(services.material_create, user=user, knowledge_base_id=base.id, title="m")
        add_record = partial(services.study_record_create, user=user, knowledge_point_id=point.id,
                             is_correct=True, score=1.0)  # fmt: skip
        adders = [[add_material if writer % 2 else add_record] * 15 for writer in range(WRITERS)]
        delete = partial(services.knowledge_base_delete, user=user, knowledge_base_id=base.id)
        seen += _race(delete, *adders)
        assert not KnowledgeBase.objects.filter(id=base.id).exists()
    assert {outcome for outcome in seen if outcome not in ("ok", "NOT_FOUND")} == set(), seen
    assert seen["NOT_FOUND"] > 0, seen  # the writers did meet the delete
    # Nothing points at a deleted base or point.
    assert not Material.objects.filter(user=user).exists()
    assert not KnowledgePoint.objects.filter(user=user).exists()
    assert not StudyRecord.objects.filter(user=user).exists()


def test_deleting_a_knowledge_point_while_records_are_added_to_it_never_errs():
    user = get_user_model().objects.create_user("racer2")
    base = services.knowledge_base_create(user=user, name="kb")
    seen: Counter[str] = Counter()
    for _ in range(ROUNDS):
        point = services.knowledge_point_create(user=user, knowledge_base_id=base.id, name="p")
        add_record = partial(services.study_record_create, user=user, knowledge_point_id=point.id,
                             is_correct=False, score=0.2)  # fmt: skip
        delete = partial(services.knowledge_point_delete, user=user, knowledge_point_id=point.id)
        seen += _race(delete, *[[add_record] * 15 for _ in range(WRITERS)])
    assert {outcome for outcome in seen if outcome not in ("ok", "NOT_FOUND")} == set(), seen
    assert not StudyRecord.objects.filter(user=user).exists()


def test_moving_records_between_points_of_a_knowledge_base_being_deleted_never_deadlocks():
    """A record moved to another point of a base being deleted: the delete locks the
    base's points, then the records it cascades to; the move locks the point it moves
    to before the record (a move that held the record while its foreign key check
    waited for the point deadlocked with the delete: a 503 Schemathesis met)."""
    user = get_user_model().objects.create_user("racer3")
    seen: Counter[str] = Counter()
    for round_no in range(ROUNDS):
        base = services.knowledge_base_create(user=user, name=f"kb {round_no}")
        points = [services.knowledge_point_create(user=user, knowledge_base_id=base.id, name=f"p{n}") for n in range(2)]
        records = [
            services.study_record_create(user=user, knowledge_point_id=points[0].id, is_correct=True, score=1.0)
            for _ in range(WRITERS)
        ]
        movers = [
            [
                partial(
                    services.study_record_update,
                    user=user,
                    study_record_id=record.id,
                    knowledge_point_id=points[(turn + 1) % 2].id,
                )
                for turn in range(15)
            ]
            for record in records
        ]
        delete = partial(services.knowledge_base_delete, user=user, knowledge_base_id=base.id)
        seen += _race(delete, *movers)
        assert not KnowledgeBase.objects.filter(id=base.id).exists()
    assert {outcome for outcome in seen if outcome not in ("ok", "NOT_FOUND")} == set(), seen
    assert not StudyRecord.objects.filter(user=user).exists()


def test_concurrent_creates_at_the_limit_never_pass_it(settings):
    """Creates of each kind from many threads at once, a few short of the limit: counted
    one at a time under the user's lock, exactly the limit is reached, never more."""
    settings.LEARNING_MAX_OBJECTS_PER_USER = 5
    user = get_user_model().objects.create_user("collector")
    base = services.knowledge_base_create(user=user, name="kb")
    point = services.knowledge_point_create(user=user, knowledge_base_id=base.id, name="p")
    adders = {
        KnowledgeBase: partial(services.knowledge_base_create, user=user, name="more"),
        Material: partial(services.material_create, user=user, knowledge_base_id=base.id, title="m"),
        KnowledgePoint: partial(services.knowledge_point_create, user=user, knowledge_base_id=base.id, name="p"),
        StudyRecord: partial(services.study_record_create, user=user, knowledge_point_id=point.id, is_correct=True,
                             score=1.0),
    }  # fmt: skip
    barrier = threading.Barrier(WRITERS * len(adders))
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def add(create) -> None:
        try:
            barrier.wait()
            for _ in range(3):
                try:
                    create()
                    outcome = "ok"
                except DomainError as exc:
                    outcome = exc.code.name
                with lock:
                    outcomes[outcome] += 1
        finally:
            connection.close()

    threads = [threading.Thread(target=add, args=(create,)) for create in adders.values() for _ in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert [model.objects.filter(user=user).count() for model in adders] == [5, 5, 5, 5]
    # One base and one point were there already: 4 bases, 5 materials, 4 points and 5
    # records created, the rest refused.
    assert outcomes == {"ok": 18, "LEARNING_LIMIT_EXCEEDED": WRITERS * len(adders) * 3 - 18}, outcomes
