"""Operators' view of the learning data."""

from __future__ import annotations

from django.contrib import admin
from django.db import models

from config.parsers import StorableJSONFormField
from learning.models import KnowledgeBase, KnowledgePoint, LearningProfile, Material, StudyRecord


@admin.register(KnowledgeBase)
class KnowledgeBaseAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "user", "created_at", "updated_at"]
    search_fields = ["id", "name", "user__username"]
    raw_id_fields = ["user"]
    readonly_fields = ["id", "created_at", "updated_at"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    list_select_related = ["user"]


@admin.register(Material)
class MaterialAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "knowledge_base", "user", "created_at"]
    search_fields = ["id", "title", "user__username", "knowledge_base__id"]
    raw_id_fields = ["user", "knowledge_base"]
    readonly_fields = ["id", "created_at", "updated_at"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    list_select_related = ["user", "knowledge_base"]


@admin.register(KnowledgePoint)
class KnowledgePointAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "knowledge_base", "user", "created_at"]
    search_fields = ["id", "name", "user__username", "knowledge_base__id"]
    raw_id_fields = ["user", "knowledge_base"]
    readonly_fields = ["id", "created_at", "updated_at"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    list_select_related = ["user", "knowledge_base"]


@admin.register(StudyRecord)
class StudyRecordAdmin(admin.ModelAdmin):
    list_display = ["id", "knowledge_point", "user", "is_correct", "score", "duration_seconds", "studied_at"]
    list_filter = ["is_correct"]
    search_fields = ["id", "user__username", "knowledge_point__id", "knowledge_point__name"]
    raw_id_fields = ["user", "knowledge_point"]
    readonly_fields = ["id", "created_at", "updated_at"]
    date_hierarchy = "studied_at"
    ordering = ["-studied_at"]
    list_select_related = ["user", "knowledge_point"]


@admin.register(LearningProfile)
class LearningProfileAdmin(admin.ModelAdmin):
    formfield_overrides = {models.JSONField: {"form_class": StorableJSONFormField}}  # preferences
    list_display = ["user", "level", "preferred_study_time", "updated_at"]
    search_fields = ["user__username", "goals"]
    raw_id_fields = ["user"]
    readonly_fields = ["created_at", "updated_at"]
    list_select_related = ["user"]
