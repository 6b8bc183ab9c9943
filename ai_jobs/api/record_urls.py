"""Result records and notifications under /ai/ (contract §4)."""

from django.urls import URLPattern, URLResolver, path

from ai_jobs.api import record_views as views

urlpatterns: list[URLPattern | URLResolver] = [
    path("analyses", views.AnalysisListView.as_view(), name="ai-analyses"),
    path("weak-points", views.WeakPointListView.as_view(), name="ai-weak-points"),
    path("recommendations", views.RecommendationListView.as_view(), name="ai-recommendations"),
    path("quizzes", views.QuizListView.as_view(), name="ai-quizzes"),
    path("flashcards", views.FlashcardListView.as_view(), name="ai-flashcards"),
    path("notifications", views.NotificationListView.as_view(), name="ai-notifications"),
    path(
        "notifications/<str:notification_id>/read",
        views.NotificationReadView.as_view(),
        name="ai-notification-read",
    ),
]
