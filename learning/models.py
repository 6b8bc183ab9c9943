"""The small learning domain the snapshots are built from: a user's
knowledge bases, the materials and knowledge points in them, the user's attempts
at knowledge points (study records), and the user's learning profile.

Every row belongs to one user; every read goes through ``learning.selectors``,
which scopes it to the owner."""

from __future__ import annotations

from functools import partial

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from config.ids import new_id

NAME_MAX = 200
DESCRIPTION_MAX = 5_000
CONTENT_MAX = 200_000


class KnowledgeBase(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=partial(new_id, "kb"), editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="knowledge_bases")
    name = models.CharField(max_length=NAME_MAX)
    description = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "learning_knowledge_base"
        indexes = [models.Index(fields=["user", "-created_at", "-id"], name="learning_kb_user_created")]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class Material(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=partial(new_id, "mat"), editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="learning_materials")
    knowledge_base = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="materials")
    title = models.CharField(max_length=NAME_MAX)
    content = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "learning_material"
        indexes = [
            models.Index(fields=["user", "-created_at", "-id"], name="learning_mat_user_created"),
            models.Index(fields=["knowledge_base", "-created_at", "-id"], name="learning_mat_kb_created"),
        ]

    def __str__(self) -> str:
        return f"{self.title} ({self.id})"


class KnowledgePoint(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=partial(new_id, "kp"), editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="knowledge_points")
    knowledge_base = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="knowledge_points")
    name = models.CharField(max_length=NAME_MAX)
    description = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "learning_knowledge_point"
        indexes = [
            models.Index(fields=["user", "-created_at", "-id"], name="learning_kp_user_created"),
            models.Index(fields=["knowledge_base", "-created_at", "-id"], name="learning_kp_kb_created"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class StudyRecord(models.Model):
    """One attempt at a knowledge point."""

    id = models.CharField(primary_key=True, max_length=40, default=partial(new_id, "rec"), editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="study_records")
    knowledge_point = models.ForeignKey(KnowledgePoint, on_delete=models.CASCADE, related_name="study_records")
    is_correct = models.BooleanField()
    score = models.FloatField(validators=[MinValueValidator(0), MaxValueValidator(100)])
    duration_seconds = models.PositiveIntegerField(default=0)
    studied_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "learning_study_record"
        indexes = [
            # The list API (newest first) and the snapshots' recent attempts and streaks.
            models.Index(fields=["user", "-created_at", "-id"], name="learning_rec_user_created"),
            models.Index(fields=["user", "-studied_at"], name="learning_rec_user_studied"),
            models.Index(fields=["knowledge_point", "-created_at", "-id"], name="learning_rec_kp_created"),
            models.Index(fields=["knowledge_point", "-studied_at"], name="learning_rec_kp_studied"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(score__gte=0) & Q(score__lte=100), name="learning_rec_score_range"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.knowledge_point_id} {'ok' if self.is_correct else 'wrong'}"


class LearningProfile(models.Model):
    """One per user (``/ai/learning-profile``): what the learner wants
    and how they like to study, given to the model with every snapshot."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="learning_profile")
    goals = models.TextField(blank=True, default="")
    level = models.CharField(max_length=64, blank=True, default="")
    preferred_study_time = models.CharField(max_length=64, blank=True, default="")
    preferences = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "learning_profile"

    def __str__(self) -> str:
        return f"Learning profile of {self.user_id}"
