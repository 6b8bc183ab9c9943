"""The user API under /ai/."""

from django.urls import URLPattern, URLResolver, include, path

from ai_jobs.api import user_views
from quotas.api import views as quota_views

urlpatterns: list[URLPattern | URLResolver] = [
    path("profile", quota_views.AiProfileView.as_view(), name="ai-profile"),
    path("settings", quota_views.AiSettingsView.as_view(), name="ai-settings"),
    path("learning-profile", user_views.LearningProfileView.as_view(), name="ai-learning-profile"),
    path("jobs", user_views.JobListView.as_view(), name="ai-jobs"),
    path("jobs/<str:job_id>", user_views.JobDetailView.as_view(), name="ai-job"),
    path("jobs/<str:job_id>/cancel", user_views.JobCancelView.as_view(), name="ai-job-cancel"),
    path("", include("ai_jobs.api.output_urls")),
]
