"""The output lists of the registered job types, and notifications, under /ai/."""

from django.urls import URLPattern, URLResolver, path

from ai_jobs import job_types
from ai_jobs.api import output_views as views

urlpatterns: list[URLPattern | URLResolver] = [
    *(
        path(output.path, views.output_list_view(output).as_view(), name=f"ai-{output.path}")
        for output in job_types.output_lists()
    ),
    path("notifications", views.NotificationListView.as_view(), name="ai-notifications"),
    path(
        "notifications/<str:notification_id>/read",
        views.NotificationReadView.as_view(),
        name="ai-notification-read",
    ),
]
