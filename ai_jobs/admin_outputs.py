"""Operators' read-only view of what results became: the outputs of every
registered job type (analyses, weak points, recommendations, quiz and flashcard
candidates with what became of each, the published questions and cards) and the
users' notifications. An output model with no page of its own here gets the plain
read-only one."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from ai_jobs import job_types
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
from delivery.models import Delivery


class ReadOnlyOutputAdmin(admin.ModelAdmin):
    """Outputs are history written by results: view, filter, never edit."""

    list_select_related = ["user"]
    date_hierarchy = "created_at"
    ordering = ["-created_at", "-id"]
    show_full_result_count = False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [field.name for field in self.model._meta.fields]

    @admin.display(description="job", ordering="job_id")
    def job(self, obj: Any) -> str:
        # A plain id: the row outlives its job, which retention deletes in time.
        return format_html(
            '<a href="{}">{}</a>', reverse("admin:ai_jobs_airuntimejob_change", args=[obj.job_id]), obj.job_id
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


_SEARCH = ["id", "job_id", "user__username", "target_id"]


class AiLearningAnalysisAdmin(ReadOnlyOutputAdmin):
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


class WeakPointCandidateAdmin(ReadOnlyOutputAdmin):
    list_display = ["id", "user", "job", "title", "severity", "knowledge_point", "confidence", "created_at"]
    list_filter = ["severity", "target_type"]
    list_select_related = ["user", "knowledge_point"]
    search_fields = [*_SEARCH, "title"]


class NextActionRecommendationAdmin(ReadOnlyOutputAdmin):
    list_display = ["id", "user", "job", "action_type", "title", "priority", "estimated_minutes", "created_at"]
    list_filter = ["action_type", "priority", "target_type"]
    search_fields = [*_SEARCH, "title"]


class QuizQuestionCandidateAdmin(ReadOnlyOutputAdmin):
    list_display = ["id", "user", "job", "status", "question_type", "difficulty", "stem", "question", "created_at"]
    list_filter = ["status", "question_type", "difficulty"]
    list_select_related = ["user", "question"]
    search_fields = [*_SEARCH, "stem"]


class QuizQuestionAdmin(ReadOnlyOutputAdmin):
    list_display = ["id", "user", "knowledge_base", "question_type", "difficulty", "stem", "job", "created_at"]
    list_filter = ["question_type", "difficulty"]
    list_select_related = ["user", "knowledge_base"]
    search_fields = [*_SEARCH, "stem", "knowledge_base__id"]


class FlashcardCandidateAdmin(ReadOnlyOutputAdmin):
    list_display = ["id", "user", "job", "status", "front", "flashcard", "created_at"]
    list_filter = ["status"]
    list_select_related = ["user", "flashcard"]
    search_fields = [*_SEARCH, "front"]


class FlashcardAdmin(ReadOnlyOutputAdmin):
    list_display = ["id", "user", "knowledge_base", "front", "job", "created_at"]
    list_select_related = ["user", "knowledge_base"]
    search_fields = [*_SEARCH, "front", "knowledge_base__id"]


class NotificationAdmin(ReadOnlyOutputAdmin):
    list_display = ["id", "user", "kind", "job_type", "title", "job", "pushes", "read_at", "created_at"]
    list_filter = ["kind", "job_type", ("read_at", admin.EmptyFieldListFilter)]
    search_fields = [*_SEARCH, "title"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*super().get_readonly_fields(request, obj), "pushes", "push_outcomes"]

    @admin.display(description="pushes")
    def pushes(self, obj: Notification) -> str:
        # The outbox's deliveries of this notice, one per device it was pushed to.
        url = reverse("admin:delivery_delivery_changelist") + "?" + urlencode({"event_id__exact": obj.id})
        return format_html('<a href="{}">deliveries</a>', url)

    @admin.display(description="push outcomes")
    def push_outcomes(self, obj: Notification) -> str:
        rows = Delivery.objects.filter(event_id=obj.id).order_by("created_at", "id")
        return ", ".join(f"{d.channel} {d.receiver_id}: {d.status}" for d in rows) or "none (no enabled device)"


PAGES: dict[type[Model], type[ReadOnlyOutputAdmin]] = {
    AiLearningAnalysis: AiLearningAnalysisAdmin,
    WeakPointCandidate: WeakPointCandidateAdmin,
    NextActionRecommendation: NextActionRecommendationAdmin,
    QuizQuestionCandidate: QuizQuestionCandidateAdmin,
    QuizQuestion: QuizQuestionAdmin,
    FlashcardCandidate: FlashcardCandidateAdmin,
    Flashcard: FlashcardAdmin,
}

for _model in job_types.output_models():
    admin.site.register(_model, PAGES.get(_model, ReadOnlyOutputAdmin))
admin.site.register(Notification, NotificationAdmin)
