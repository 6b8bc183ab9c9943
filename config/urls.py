from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerView

from config.schema import SchemaView
from ops import dashboard

urlpatterns = [
    # The operators' dashboard (ops reads every app, so it sits above them), at its admin address.
    path("admin/ai_jobs/airuntimejob/dashboard/", dashboard.view, name="ai_jobs_dashboard"),
    path("admin/", admin.site.urls),
    path("api/schema", SchemaView.as_view(), name="schema"),
    path("api/docs", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("auth/", include("accounts.api.urls")),
    path("internal/runtime/", include("ai_jobs.api.internal_urls")),
    path("ai/", include("ai_jobs.api.user_urls")),
    path("ai/", include("credentials.api.urls")),
    path("learning/", include("learning.api.urls")),
    path("", include("asynch.api.urls")),  # /model/* and /task/* (contract §6)
    path("", include("ops.urls")),  # /healthz, /readyz, /metrics (contract §8)
]

handler404 = "config.errors.json_not_found"
handler500 = "config.errors.json_server_error"
