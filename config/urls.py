from csp.decorators import csp_update
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerSplitView

from config.errors import json_not_found
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
]

handler400 = "config.errors.json_bad_request"
handler404 = "config.urls.not_found"
handler500 = "config.errors.json_server_error"


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """A mistyped admin address is an admin page ("Page not found", with the way back);
    everything else gets the JSON 404 ``NOT_FOUND``."""
    if request.path.startswith("/admin/"):
        context = {**admin.site.each_context(request), "request_path": request.path}
        return TemplateResponse(request, "admin/404.html", context, status=404)
    return json_not_found(request, exception)
