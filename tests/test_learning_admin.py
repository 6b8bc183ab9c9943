"""The learning admin pages render, and the learning-profile wire shapes validate."""

from __future__ import annotations

import pytest
from django.test import Client

from learning.api.serializers import LearningProfileInSerializer, LearningProfileSerializer
from learning.models import KnowledgeBase, KnowledgePoint, LearningProfile, Material, StudyRecord
from tests.support.factories import UserFactory
from tests.support.learning_factories import LearningProfileFactory, MaterialFactory, StudyRecordFactory

pytestmark = pytest.mark.django_db


def test_admin_lists_and_change_pages_render():
    admin_user = UserFactory(is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(admin_user)
    record = StudyRecordFactory()
    MaterialFactory(knowledge_base=record.knowledge_point.knowledge_base)
    LearningProfileFactory(user=record.user)
    for model in (KnowledgeBase, Material, KnowledgePoint, StudyRecord, LearningProfile):
        name = model._meta.model_name
        assert client.get(f"/admin/learning/{name}/").status_code == 200, name
        obj = model.objects.get()
        assert client.get(f"/admin/learning/{name}/{obj.pk}/change/").status_code == 200, name


def test_learning_profile_wire_shapes():
    data = {"goals": "Exam", "level": "beginner", "preferredStudyTime": "evening", "preferences": {"pace": "slow"}}
    assert LearningProfileInSerializer(data=data).is_valid()
    for bad in (
        {"preferences": ["not", "an", "object"]},
        {"preferences": {"x": "nul\u0000"}},
        {"preferences": {"x": "y" * 10_001}},
        {"level": "x" * 65},
        {"goals": 5},
    ):
        serializer = LearningProfileInSerializer(data=bad)
        assert not serializer.is_valid() and set(serializer.errors) == set(bad), bad
    profile = LearningProfileFactory()
    assert LearningProfileSerializer(profile).data["preferredStudyTime"] == "evening"
