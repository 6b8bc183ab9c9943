"""Every write to the learning domain: ``<entity>_<verb>`` functions with
keyword-only arguments. A reference to another object (``knowledge_base_id``,
``knowledge_point_id``) is resolved through the owner-scoped selectors, so an id
that is missing or another user's answers ``404 NOT_FOUND`` alike."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Model
from django.utils import timezone

from config.errors import DomainError, ErrorCode
from learning import selectors
from learning.models import KnowledgeBase, KnowledgePoint, LearningProfile, Material, StudyRecord

_UNSET: Any = object()


def _apply(obj: Any, changes: dict[str, Any]) -> None:
    """Set the given fields (those not left ``_UNSET``) with one conditional UPDATE: an
    object (or one it now points to) deleted meanwhile by another request is a 404,
    exactly as if it had gone first, never a server error.

    A row it is moved under is locked first, as ``_create`` locks a parent: a delete of
    that parent locks it and then the rows it cascades to, so an UPDATE that held this
    row while its foreign key check waited for the parent would deadlock with it."""
    fields = {name: value for name, value in changes.items() if value is not _UNSET}
    if not fields:
        return
    fields["updated_at"] = timezone.now()
    try:
        with transaction.atomic():
            parents = [value for value in fields.values() if isinstance(value, Model)]
            if all(_locked(type(parent), no_key=True, pk=parent.pk) for parent in parents):
                changed = type(obj)._default_manager.filter(pk=obj.pk).update(**fields)
            else:
                changed = 0  # what it is moved under is gone
    except IntegrityError:
        changed = 0  # what it was to point to is gone
    if not changed:
        raise DomainError(ErrorCode.NOT_FOUND, f"{type(obj).__name__} {obj.pk} not found")
    for name, value in fields.items():
        setattr(obj, name, value)


def _locked(model: type[Any], *, no_key: bool = False, **lookup: Any) -> list[Any]:
    """Lock the rows (FOR UPDATE, or FOR NO KEY UPDATE) until the transaction ends; their keys."""
    return list(model._default_manager.select_for_update(no_key=no_key).filter(**lookup).values_list("pk", flat=True))


def _within_limit(model: type[Any], *, user: AbstractBaseUser) -> None:
    """Inside the creating transaction: refuse a create past the objects of this kind a
    user may hold. The count is taken under the user's row lock (SQLite's transactions
    take the database's write lock from their start), so creates at the limit are
    counted one at a time and never go past it. The count stops at the limit."""
    limit = settings.LEARNING_MAX_OBJECTS_PER_USER
    _locked(get_user_model(), no_key=True, pk=user.pk)
    if model._default_manager.filter(user=user)[:limit].count() >= limit:
        raise DomainError(
            ErrorCode.LEARNING_LIMIT_EXCEEDED,
            f"A user holds at most {limit} {model._meta.verbose_name_plural}: delete some to add more",
        )


def _create(model: type[Any], *, parent: Any, **fields: Any) -> Any:
    """Insert a row under ``parent`` while holding the parent's row lock, so a concurrent
    delete of the parent either finds the new row (and deletes it with its cascade) or
    goes first (then this is a 404, as if the parent had never been). The parent is
    locked before the user (``_within_limit``), as deleting a user deletes their rows
    before the user's own."""
    try:
        with transaction.atomic():
            if not _locked(type(parent), no_key=True, pk=parent.pk):
                raise DomainError(ErrorCode.NOT_FOUND, f"{type(parent).__name__} {parent.pk} not found")
            _within_limit(model, user=fields["user"])
            return model._default_manager.create(**fields)
    except IntegrityError as exc:  # SQLite has no row locks: its foreign key check at commit says it
        raise DomainError(ErrorCode.NOT_FOUND, f"{type(parent).__name__} {parent.pk} not found") from exc


def _delete(obj: Any, *, holding: tuple[tuple[type[Any], str], ...] = ()) -> None:
    """Delete a row that others are created under (a knowledge base, a knowledge point)
    with the cascade, after locking the row and the ``holding`` children (model,
    foreign key) that rows are created under, so no row is added to what the cascade
    collected. A row moved under it meanwhile fails the foreign key at commit: collect again."""
    model, pk = type(obj), obj.pk
    for attempt in range(3):
        try:
            with transaction.atomic():
                _locked(model, pk=pk)
                for child, key in holding:
                    _locked(child, **{key: pk})
                model._default_manager.filter(pk=pk).delete()
            return
        except IntegrityError:
            if attempt == 2:
                raise


# --- knowledge bases ---------------------------------------------------------------------


def knowledge_base_create(*, user: AbstractBaseUser, name: str, description: str = "") -> KnowledgeBase:
    with transaction.atomic():
        _within_limit(KnowledgeBase, user=user)
        return KnowledgeBase.objects.create(user=user, name=name, description=description)


def knowledge_base_update(
    *, user: AbstractBaseUser, knowledge_base_id: str, name: str = _UNSET, description: str = _UNSET
) -> KnowledgeBase:
    knowledge_base = selectors.knowledge_base_get(user=user, knowledge_base_id=knowledge_base_id)
    _apply(knowledge_base, {"name": name, "description": description})
    return knowledge_base


def knowledge_base_delete(*, user: AbstractBaseUser, knowledge_base_id: str) -> None:
    """Deletes the knowledge base with its materials, knowledge points and their records."""
    knowledge_base = selectors.knowledge_base_get(user=user, knowledge_base_id=knowledge_base_id)
    _delete(knowledge_base, holding=((KnowledgePoint, "knowledge_base"),))


# --- materials ------------------------------------------------------------------------------


def material_create(*, user: AbstractBaseUser, knowledge_base_id: str, title: str, content: str = "") -> Material:
    knowledge_base = selectors.knowledge_base_get(user=user, knowledge_base_id=knowledge_base_id)
    return _create(
        Material, parent=knowledge_base, user=user, knowledge_base=knowledge_base, title=title, content=content
    )


def material_update(
    *,
    user: AbstractBaseUser,
    material_id: str,
    knowledge_base_id: str = _UNSET,
    title: str = _UNSET,
    content: str = _UNSET,
) -> Material:
    material = selectors.material_get(user=user, material_id=material_id)
    knowledge_base = _UNSET
    if knowledge_base_id is not _UNSET:
        knowledge_base = selectors.knowledge_base_get(user=user, knowledge_base_id=knowledge_base_id)
    _apply(material, {"knowledge_base": knowledge_base, "title": title, "content": content})
    return material


def material_delete(*, user: AbstractBaseUser, material_id: str) -> None:
    selectors.material_get(user=user, material_id=material_id).delete()


# --- knowledge points ------------------------------------------------------------------------


def knowledge_point_create(
    *, user: AbstractBaseUser, knowledge_base_id: str, name: str, description: str = ""
) -> KnowledgePoint:
    knowledge_base = selectors.knowledge_base_get(user=user, knowledge_base_id=knowledge_base_id)
    return _create(
        KnowledgePoint,
        parent=knowledge_base,
        user=user,
        knowledge_base=knowledge_base,
        name=name,
        description=description,
    )


def knowledge_point_update(
    *,
    user: AbstractBaseUser,
    knowledge_point_id: str,
    knowledge_base_id: str = _UNSET,
    name: str = _UNSET,
    description: str = _UNSET,
) -> KnowledgePoint:
    knowledge_point = selectors.knowledge_point_get(user=user, knowledge_point_id=knowledge_point_id)
    knowledge_base = _UNSET
    if knowledge_base_id is not _UNSET:
        knowledge_base = selectors.knowledge_base_get(user=user, knowledge_base_id=knowledge_base_id)
    _apply(knowledge_point, {"knowledge_base": knowledge_base, "name": name, "description": description})
    return knowledge_point


def knowledge_point_delete(*, user: AbstractBaseUser, knowledge_point_id: str) -> None:
    """Deletes the knowledge point with its study records."""
    _delete(selectors.knowledge_point_get(user=user, knowledge_point_id=knowledge_point_id))


# --- study records ----------------------------------------------------------------------------


def study_record_create(
    *,
    user: AbstractBaseUser,
    knowledge_point_id: str,
    is_correct: bool,
    score: float,
    duration_seconds: int = 0,
    studied_at: dt.datetime | None = None,
) -> StudyRecord:
    knowledge_point = selectors.knowledge_point_get(user=user, knowledge_point_id=knowledge_point_id)
    return _create(
        StudyRecord,
        parent=knowledge_point,
        user=user,
        knowledge_point=knowledge_point,
        is_correct=is_correct,
        score=score,
        duration_seconds=duration_seconds,
        studied_at=studied_at or timezone.now(),
    )


def study_record_update(
    *,
    user: AbstractBaseUser,
    study_record_id: str,
    knowledge_point_id: str = _UNSET,
    is_correct: bool = _UNSET,
    score: float = _UNSET,
    duration_seconds: int = _UNSET,
    studied_at: dt.datetime = _UNSET,
) -> StudyRecord:
    record = selectors.study_record_get(user=user, study_record_id=study_record_id)
    knowledge_point = _UNSET
    if knowledge_point_id is not _UNSET:
        knowledge_point = selectors.knowledge_point_get(user=user, knowledge_point_id=knowledge_point_id)
    _apply(
        record,
        {
            "knowledge_point": knowledge_point,
            "is_correct": is_correct,
            "score": score,
            "duration_seconds": duration_seconds,
            "studied_at": studied_at,
        },
    )
    return record


def study_record_delete(*, user: AbstractBaseUser, study_record_id: str) -> None:
    selectors.study_record_get(user=user, study_record_id=study_record_id).delete()


# --- the learning profile -----------------------------------------------------------------------


def learning_profile_update(
    *,
    user: AbstractBaseUser,
    goals: str = _UNSET,
    level: str = _UNSET,
    preferred_study_time: str = _UNSET,
    preferences: dict[str, Any] = _UNSET,
) -> LearningProfile:
    """Create the user's profile on first use and set the given fields; a field
    not passed keeps its value (so both PUT and PATCH semantics can call it)."""
    changes = {"goals": goals, "level": level, "preferred_study_time": preferred_study_time, "preferences": preferences}
    for attempt in range(3):
        profile, _ = LearningProfile.objects.get_or_create(user=user)
        try:
            _apply(profile, changes)
            return profile
        except DomainError:  # deleted by a concurrent DELETE: made again
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def learning_profile_delete(*, user: AbstractBaseUser) -> None:
    """Forget the user's profile: reading it afterwards gives the empty one, and the
    next snapshot carries no profile."""
    LearningProfile.objects.filter(user=user).delete()
