from django.urls import path

from ops import views

urlpatterns = [
    path("healthz", views.HealthzView.as_view(), name="healthz"),
    path("readyz", views.ReadyzView.as_view(), name="readyz"),
    path("metrics", views.MetricsView.as_view(), name="metrics"),
]
