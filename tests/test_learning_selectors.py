"""What the job-creation flow and /ai/learning-profile ask of the learning app: whether
a target is the user's own, and the learning profile, created on first write and then
changed only in what it is given."""

from __future__ import annotations

import pytest

from accounts.selectors import public_id_of
from learning import selectors, services
from learning.models import LearningProfile
from tests.support.learning_factories import KnowledgePointFactory, MaterialFactory, others_objects

pytestmark = pytest.mark.django_db


def test_target_exists_for_user_only_for_the_users_own_targets(user, other_user):
    kp = KnowledgePointFactory(knowledge_base__user=user)
    material = MaterialFactory(knowledge_base=kp.knowledge_base)
    others = others_objects(other_user)

    def exists(target_type: str, target_id: str) -> bool:
        return selectors.target_exists_for_user(user=user, target_type=target_type, target_id=target_id)

    assert exists("user", "me") and exists("user", public_id_of(user))
    assert not exists("user", str(user.pk))  # the database's key names no one on the wire: users are their public id
    assert not exists("user", public_id_of(other_user))
    assert exists("knowledge_base", kp.knowledge_base_id)
    assert exists("knowledge_point", kp.id)
    assert exists("material", material.id)
    assert not exists("knowledge_base", others["knowledge-bases"].id)
    assert not exists("knowledge_point", others["knowledge-points"].id)
    assert not exists("material", others["materials"].id)
    assert not exists("knowledge_point", material.id)  # right id, wrong type
    assert not exists("material", "mat_missing")
    assert not exists("galaxy", kp.id)


def test_learning_profile_update_creates_then_changes_only_what_it_is_given(user):
    assert selectors.learning_profile_get(user=user) is None
    assert selectors.learning_profile_data(user=user)["goals"] == ""
    profile = services.learning_profile_update(user=user, goals="Pass the exam", level="beginner")
    assert (profile.goals, profile.level, profile.preferred_study_time) == ("Pass the exam", "beginner", "")
    services.learning_profile_update(user=user, preferred_study_time="evening", preferences={"pace": "slow"})
    data = selectors.learning_profile_data(user=user)
    assert data["goals"] == "Pass the exam" and data["preferredStudyTime"] == "evening"
    assert data["preferences"] == {"pace": "slow"} and data["updatedAt"]
    assert LearningProfile.objects.filter(user=user).count() == 1
