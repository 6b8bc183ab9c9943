"""Object-level authorization across the whole user API: another user's id answers
404, exactly as a missing one, and changes nothing; lists never show it."""

from __future__ import annotations

import pytest
from django.db import models
from django.forms.models import model_to_dict

from ai_jobs.models import AiRuntimeJob, Notification
from credentials.models import Credential
from learning.models import KnowledgeBase, KnowledgePoint, Material, StudyRecord
from tests.support.api import RuntimeClient
from tests.support.factories import VALID_OUTPUTS
from tests.support.learning_factories import (
    KnowledgeBaseFactory,
    KnowledgePointFactory,
    MaterialFactory,
    StudyRecordFactory,
)
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


@pytest.fixture
def owner_objects(django_capture_on_commit_callbacks, settings):
    """One of everything, owned by ``owner``, with a finished job's records."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    owner = Learner()
    kb = KnowledgeBaseFactory(user=owner.user)
    point = KnowledgePointFactory(user=owner.user, knowledge_base=kb)
    objects = {
        "kb": kb,
        "material": MaterialFactory(user=owner.user, knowledge_base=kb),
        "point": point,
        "record": StudyRecordFactory(user=owner.user, knowledge_point=point),
        "credential": Credential.objects.get(id=owner.credential()),
    }
    runtime = RuntimeClient("runtime-1")
    with django_capture_on_commit_callbacks(execute=True):
        job_id = owner.quiz(kb=kb).json()["jobId"]
        runtime.lock(job_id)
        assert runtime.result(job_id, 1, VALID_OUTPUTS["quiz_generation"]).status_code == 200
    objects["job"] = AiRuntimeJob.objects.get(id=job_id)
    objects["notification"] = Notification.objects.get(job_id=job_id)
    objects["pending_job"] = AiRuntimeJob.objects.get(id=owner.job().json()["jobId"])
    return owner, objects


def _state(instance: models.Model) -> dict:
    return model_to_dict(type(instance).objects.get(pk=instance.pk))


def test_every_endpoint_answers_404_for_another_users_object_and_changes_nothing(owner_objects):
    _owner, o = owner_objects
    stranger = Learner()
    before = {name: _state(instance) for name, instance in o.items()}
    c = stranger.client
    attempts = [
        ("GET", f"/ai/jobs/{o['pending_job'].id}", None),
        ("POST", f"/ai/jobs/{o['pending_job'].id}/cancel", None),
        ("POST", f"/ai/notifications/{o['notification'].id}/read", None),
        ("GET", f"/ai/model-credentials/{o['credential'].id}", None),
        ("PUT", f"/ai/model-credentials/{o['credential'].id}", {"name": "mine now"}),
        ("PATCH", f"/ai/model-credentials/{o['credential'].id}", {"name": "mine now"}),
        ("DELETE", f"/ai/model-credentials/{o['credential'].id}", None),
        ("POST", f"/ai/model-credentials/{o['credential'].id}/test", None),
    ]
    for name, path in (("kb", "knowledge-bases"), ("material", "materials"), ("point", "knowledge-points"),
                       ("record", "study-records")):  # fmt: skip
        attempts += [
            ("GET", f"/learning/{path}/{o[name].id}", None),
            ("PATCH", f"/learning/{path}/{o[name].id}", {"name": "x", "title": "x", "score": 1}),
            ("DELETE", f"/learning/{path}/{o[name].id}", None),
        ]
    for method, path, body in attempts:
        response = (
            c.generic(method, path, data=None)
            if body is None
            else getattr(c, method.lower())(path, body, format="json")
        )
        missing = (
            c.generic(method, path.replace(path.split("/")[3], "missing_0000"), data=None) if body is None else None
        )
        assert response.status_code == 404, (method, path, response.status_code)
        if missing is not None:
            assert response.json()["error"]["code"] == missing.json()["error"]["code"], (method, path)
    # Creating with another user's target or credential.
    assert stranger.quiz(kb=o["kb"]).status_code == 404
    foreign_credential = stranger.job(apiKeyMode="user_deepseek_key", credentialId=o["credential"].id)
    assert foreign_credential.status_code == 404
    for path, body in (("/learning/materials", {"knowledgeBaseId": o["kb"].id, "title": "t", "content": "c"}),
                       ("/learning/knowledge-points", {"knowledgeBaseId": o["kb"].id, "name": "n"}),
                       ("/learning/study-records", {"knowledgePointId": o["point"].id, "isCorrect": True})):  # fmt: skip
        assert c.post(path, body, format="json").status_code == 404, path
    after = {name: _state(instance) for name, instance in o.items()}
    assert after == before
    assert KnowledgeBase.objects.filter(user=stranger.user).count() == 0
    assert not Material.objects.filter(user=stranger.user).exists()
    assert not KnowledgePoint.objects.filter(user=stranger.user).exists()
    assert not StudyRecord.objects.filter(user=stranger.user).exists()


def test_no_list_shows_another_users_objects(owner_objects):
    owner, o = owner_objects
    stranger = Learner()
    lists = ["/ai/jobs", "/ai/analyses", "/ai/weak-points", "/ai/recommendations", "/ai/quizzes", "/ai/flashcards",
             "/ai/notifications", "/ai/model-credentials", "/learning/knowledge-bases", "/learning/materials",
             "/learning/knowledge-points", "/learning/study-records"]  # fmt: skip
    assert owner.get("/ai/quizzes").json()["results"], "the owner sees their records"
    for path in lists:
        response = stranger.get(path)
        assert response.status_code == 200 and response.json()["results"] == [], path
    assert stranger.get("/ai/quizzes", jobId=o["job"].id).json()["results"] == []
    assert stranger.get("/learning/materials", knowledgeBaseId=o["kb"].id).json()["results"] == []
