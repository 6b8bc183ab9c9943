"""The OpenAPI schema view, one generation at a time per process.

drf-spectacular's generator keeps state in class attributes (lazily loaded extension
classes, generator statistics) and is not thread-safe (tfranzel/drf-spectacular#1368,
#1123): two first requests at once in one gunicorn worker's threads can fail with a
500. The schema is generated in milliseconds, so a lock costs nothing."""

from __future__ import annotations

import threading

from drf_spectacular.views import SpectacularAPIView
from rest_framework.request import Request
from rest_framework.response import Response


class SchemaView(SpectacularAPIView):
    _lock = threading.Lock()

    def _get_schema_response(self, request: Request) -> Response:  # where the generator runs
        with self._lock:
            return super()._get_schema_response(request)
