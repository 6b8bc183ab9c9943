"""Result records and notifications under /ai/ (contract §4)."""

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
