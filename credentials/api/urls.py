"""The user's model credentials under /ai/."""

from django.urls import path

from credentials.api import views

app_name = "credentials"

urlpatterns = [
    path("model-credentials", views.CredentialListView.as_view(), name="list"),
    path("model-credentials/<str:credential_id>", views.CredentialDetailView.as_view(), name="detail"),
    path("model-credentials/<str:credential_id>/test", views.CredentialTestView.as_view(), name="test"),
]
