from csp.decorators import csp_update
from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularSwaggerSplitView

from config import pages
from config.schema import SchemaView
from ops import dashboard

# Swagger UI with its start-up script served apart (?script), not inline, and its style in a
# stylesheet (templates/drf_spectacular/swagger_ui.html): the page keeps the admin's
# Content-Security-Policy, with the data: images of Swagger UI's stylesheet.
docs = csp_update({"img-src": "data:"})(SpectacularSwaggerSplitView.as_view(url_name="schema"))

urlpatterns = [
    # The operators' dashboard (ops reads every app, so it sits above them), at its admin address.
    path("admin/ai_jobs/airuntimejob/dashboard/", dashboard.view, name="ai_jobs_dashboard"),
    path("admin/", admin.site.urls),
    path("api/schema", SchemaView.as_view(), name="schema"),
    path("api/docs", docs, name="docs"),
    path("auth/", include("accounts.api.urls")),
    path("internal/runtime/", include("ai_jobs.api.internal_urls")),
    path("ai/", include("ai_jobs.api.user_urls")),
    path("ai/", include("credentials.api.urls")),
    path("ai/", include("delivery.api.urls")),
    path("learning/", include("learning.api.urls")),
    path("", include("asynch.api.urls")),  # /model/* and /task/*
    path("", include("ops.urls")),  # /healthz, /readyz, /metrics
    path("", pages.front_door, name="front_door"),
    re_path(r"", pages.no_such_path),  # last: see config/pages.py
]

handler400 = "config.errors.json_bad_request"
handler404 = "config.pages.not_found"
handler500 = "config.errors.json_server_error"
