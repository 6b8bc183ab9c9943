"""Owner-scoped reads of the learning domain. Another user's object is looked up
exactly like a missing one: both raise ``DomainError(NOT_FOUND)`` (``404``)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from accounts.selectors import names_user
from config.errors import DomainError, ErrorCode
from learning.models import KnowledgeBase, KnowledgePoint, LearningProfile, Material, StudyRecord

# The target types of ``ai_jobs.models.TargetType``, spelled here so this app does
# not import the job app's models.
TARGET_USER = "user"
TARGET_MATERIAL = "material"
TARGET_KNOWLEDGE_POINT = "knowledge_point"
TARGET_KNOWLEDGE_BASE = "knowledge_base"


def _not_found(kind: str, object_id: str) -> DomainError:
    return DomainError(ErrorCode.NOT_FOUND, f"{kind} {object_id} not found")


# --- lists (newest first is the paginator's ordering) -------------------------------------


def knowledge_base_list(*, user: AbstractBaseUser) -> QuerySet[KnowledgeBase]:
    return KnowledgeBase.objects.filter(user=user)


def material_list(*, user: AbstractBaseUser, knowledge_base_id: str | None = None) -> QuerySet[Material]:
    materials = Material.objects.filter(user=user)
    if knowledge_base_id is not None:
        materials = materials.filter(knowledge_base_id=knowledge_base_id)
    return materials


def knowledge_point_list(*, user: AbstractBaseUser, knowledge_base_id: str | None = None) -> QuerySet[KnowledgePoint]:
    points = KnowledgePoint.objects.filter(user=user)
    if knowledge_base_id is not None:
        points = points.filter(knowledge_base_id=knowledge_base_id)
    return points


def study_record_list(*, user: AbstractBaseUser, knowledge_point_id: str | None = None) -> QuerySet[StudyRecord]:
    records = StudyRecord.objects.filter(user=user)
    if knowledge_point_id is not None:
        records = records.filter(knowledge_point_id=knowledge_point_id)
    return records


# --- one object ------------------------------------------------------------------------------


def knowledge_base_get(*, user: AbstractBaseUser, knowledge_base_id: str) -> KnowledgeBase:
    knowledge_base = KnowledgeBase.objects.filter(user=user, id=knowledge_base_id).first()
    if knowledge_base is None:
        raise _not_found("Knowledge base", knowledge_base_id)
    return knowledge_base


def material_get(*, user: AbstractBaseUser, material_id: str) -> Material:
    material = Material.objects.filter(user=user, id=material_id).first()
    if material is None:
        raise _not_found("Material", material_id)
    return material


def knowledge_point_get(*, user: AbstractBaseUser, knowledge_point_id: str) -> KnowledgePoint:
    point = KnowledgePoint.objects.filter(user=user, id=knowledge_point_id).first()
    if point is None:
        raise _not_found("Knowledge point", knowledge_point_id)
    return point


def study_record_get(*, user: AbstractBaseUser, study_record_id: str) -> StudyRecord:
    record = StudyRecord.objects.filter(user=user, id=study_record_id).first()
    if record is None:
        raise _not_found("Study record", study_record_id)
    return record


def learning_profile_get(*, user: AbstractBaseUser) -> LearningProfile | None:
    """The user's profile, or ``None`` before they have set one."""
    return LearningProfile.objects.filter(user=user).first()


def learning_profile_data(*, user: AbstractBaseUser) -> dict[str, object]:
    """The profile in the API's camelCase (``/ai/learning-profile`` and the
    snapshots); an empty profile for a user who never set one."""
    profile = learning_profile_get(user=user)
    if profile is None:
        return {"goals": "", "level": "", "preferredStudyTime": "", "preferences": {}, "updatedAt": None}
    return {
        "goals": profile.goals,
        "level": profile.level,
        "preferredStudyTime": profile.preferred_study_time,
        "preferences": profile.preferences,
        "updatedAt": profile.updated_at.isoformat(),
    }


# --- the job-creation flow ---------------------------------------------------------------------


def target_exists_for_user(*, user: AbstractBaseUser, target_type: str, target_id: str) -> bool:
    """Whether ``target_id`` names an object of ``target_type`` that belongs to
    ``user``: ``POST /ai/jobs`` takes no job about anything else. ``user`` targets
    the learner themself: ``target_id`` is ``"me"`` or their public id, never the
    database's key. An unknown target type is ``False``."""
    target_id = str(target_id)
    if target_type == TARGET_USER:
        return names_user(user, target_id)
    model = {
        TARGET_KNOWLEDGE_BASE: KnowledgeBase,
        TARGET_MATERIAL: Material,
        TARGET_KNOWLEDGE_POINT: KnowledgePoint,
    }.get(target_type)
    if model is None:
        return False
    return model.objects.filter(user=user, id=target_id).exists()
