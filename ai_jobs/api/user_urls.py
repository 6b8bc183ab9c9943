"""The user API under /ai/ (contract §4)."""

from django.urls import URLPattern, URLResolver, include, path

urlpatterns: list[URLPattern | URLResolver] = [
    path("", include("ai_jobs.api.record_urls")),
]
