"""Factories of the learning domain (tests/test_learning*.py)."""

from __future__ import annotations

from typing import Any

import factory
from django.utils import timezone

from learning.models import KnowledgeBase, KnowledgePoint, LearningProfile, Material, StudyRecord
from tests.support.factories import UserFactory


class KnowledgeBaseFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = KnowledgeBase

    user = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"Knowledge base {n}")
    description = "Fractions and decimals"


class MaterialFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Material

    knowledge_base = factory.SubFactory(KnowledgeBaseFactory)
    user = factory.LazyAttribute(lambda material: material.knowledge_base.user)
    title = factory.Sequence(lambda n: f"Chapter {n}")
    content = "A fraction is a part of a whole."


class KnowledgePointFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = KnowledgePoint

    knowledge_base = factory.SubFactory(KnowledgeBaseFactory)
    user = factory.LazyAttribute(lambda point: point.knowledge_base.user)
    name = factory.Sequence(lambda n: f"Point {n}")
    description = "Adding fractions with unlike denominators"


class StudyRecordFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StudyRecord

    knowledge_point = factory.SubFactory(KnowledgePointFactory)
    user = factory.LazyAttribute(lambda record: record.knowledge_point.user)
    is_correct = True
    score = 100.0
    duration_seconds = 60
    studied_at = factory.LazyFunction(timezone.now)


class LearningProfileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LearningProfile

    user = factory.SubFactory(UserFactory)
    goals = "Pass the algebra exam"
    level = "beginner"
    preferred_study_time = "evening"
    preferences = {"language": "en"}


def others_objects(other_user) -> dict[str, Any]:
    """One of each learning object, all owned by ``other_user``, by their API resource."""
    record = StudyRecordFactory(knowledge_point__knowledge_base__user=other_user)
    kp = record.knowledge_point
    return {
        "knowledge-bases": kp.knowledge_base,
        "materials": MaterialFactory(knowledge_base=kp.knowledge_base),
        "knowledge-points": kp,
        "study-records": record,
    }
