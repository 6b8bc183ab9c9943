"""``/auth/*`` (contract §2)."""

from django.urls import path

from accounts.api import views

urlpatterns = [
    path("token", views.TokenView.as_view(), name="token"),
    path("token/refresh", views.TokenRefreshView.as_view(), name="token-refresh"),
    path("register", views.RegisterView.as_view(), name="register"),
]
