"""Operators' read-only view of what results became: analyses, weak points,
recommendations, quiz and flashcard candidates with what became of each, the
published questions and cards, and the users' notifications."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from ai_jobs.models import (
    AiLearningAnalysis,
    Flashcard,
    FlashcardCandidate,
    NextActionRecommendation,
    Notification,
    QuizQuestion,
    QuizQuestionCandidate,
    WeakPointCandidate,
)


class ReadOnlyRecordAdmin(admin.ModelAdmin):
    """Records are history written by results: view, filter, never edit."""

    list_select_related = ["user", "job"]
    date_hierarchy = "created_at"
    ordering = ["-created_at", "-id"]
    show_full_result_count = False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [field.name for field in self.model._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


_SEARCH = ["id", "job__id", "user__username", "target_id"]


@admin.register(AiLearningAnalysis)
class AiLearningAnalysisAdmin(ReadOnlyRecordAdmin):
    list_display = [
        "id",
        "user",
        "job",
        "target_type",
        "target_id",
        "level",
        "mastery_score",
        "confidence",
        "created_at",
    ]
    list_filter = ["level", "target_type"]
    search_fields = _SEARCH


@admin.register(WeakPointCandidate)
class WeakPointCandidateAdmin(ReadOnlyRecordAdmin):
    list_display = ["id", "user", "job", "title", "severity", "knowledge_point", "confidence", "created_at"]
    list_filter = ["severity", "target_type"]
    list_select_related = ["user", "job", "knowledge_point"]
    search_fields = [*_SEARCH, "title"]


@admin.register(NextActionRecommendation)
class NextActionRecommendationAdmin(ReadOnlyRecordAdmin):
    list_display = ["id", "user", "job", "action_type", "title", "priority", "estimated_minutes", "created_at"]
    list_filter = ["action_type", "priority", "target_type"]
    search_fields = [*_SEARCH, "title"]


@admin.register(QuizQuestionCandidate)
class QuizQuestionCandidateAdmin(ReadOnlyRecordAdmin):
    list_display = ["id", "user", "job", "status", "question_type", "difficulty", "stem", "question", "created_at"]
    list_filter = ["status", "question_type", "difficulty"]
    list_select_related = ["user", "job", "question"]
    search_fields = [*_SEARCH, "stem"]


@admin.register(QuizQuestion)
class QuizQuestionAdmin(ReadOnlyRecordAdmin):
    list_display = ["id", "user", "knowledge_base", "question_type", "difficulty", "stem", "job", "created_at"]
    list_filter = ["question_type", "difficulty"]
    list_select_related = ["user", "job", "knowledge_base"]
    search_fields = [*_SEARCH, "stem", "knowledge_base__id"]


@admin.register(FlashcardCandidate)
class FlashcardCandidateAdmin(ReadOnlyRecordAdmin):
    list_display = ["id", "user", "job", "status", "front", "flashcard", "created_at"]
    list_filter = ["status"]
    list_select_related = ["user", "job", "flashcard"]
    search_fields = [*_SEARCH, "front"]


@admin.register(Flashcard)
class FlashcardAdmin(ReadOnlyRecordAdmin):
    list_display = ["id", "user", "knowledge_base", "front", "job", "created_at"]
    list_select_related = ["user", "job", "knowledge_base"]
    search_fields = [*_SEARCH, "front", "knowledge_base__id"]


@admin.register(Notification)
class NotificationAdmin(ReadOnlyRecordAdmin):
    list_display = ["id", "user", "kind", "job_type", "title", "job", "read_at", "created_at"]
    list_filter = ["kind", "job_type", ("read_at", admin.EmptyFieldListFilter)]
    search_fields = [*_SEARCH, "title"]
