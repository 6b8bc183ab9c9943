"""``/auth/*``."""

from django.urls import path

from accounts.api import views

urlpatterns = [
    path("token", views.TokenView.as_view(), name="token"),
    path("token/refresh", views.TokenRefreshView.as_view(), name="token-refresh"),
    path("logout", views.LogoutView.as_view(), name="logout"),
    path("password", views.PasswordView.as_view(), name="password"),
    path("register", views.RegisterView.as_view(), name="register"),
]
