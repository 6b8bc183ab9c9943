"""The OpenAPI schema view: the schema is built once per process and language, then
served from memory (contract section 10), so a caller cannot make the server spend a
generation on every request. ``?version=`` is not read: the API has one version, and
each distinct value would be another schema to build.

drf-spectacular's generator keeps state in class attributes (lazily loaded extension
classes, generator statistics) and is not thread-safe (tfranzel/drf-spectacular#1368,
#1123): two first requests at once in one gunicorn worker's threads can fail with a
500, so the one generation happens under a lock."""

from __future__ import annotations

import threading
from typing import Any

from django.utils import translation
from drf_spectacular.views import SpectacularAPIView
from rest_framework.request import Request
from rest_framework.response import Response

# Built schemas by language; the languages are the project's LANGUAGES, so it stays small.
_BUILT: dict[str | None, dict[str, Any]] = {}


class SchemaView(SpectacularAPIView):
    _lock = threading.Lock()

    def _get_version_parameter(self, request: Request) -> None:
        return None

    def _get_schema_response(self, request: Request) -> Response:  # where the generator runs
        language = translation.get_language()
        schema = _BUILT.get(language)
        if schema is None:
            with self._lock:
                schema = _BUILT.get(language)
                if schema is None:
                    schema = _BUILT[language] = super()._get_schema_response(request).data
        return Response(
            data=schema, headers={"Content-Disposition": f'inline; filename="{self._get_filename(request, None)}"'}
        )


def forget_built_schemas() -> None:
    """For tests that change what the schema documents in one process."""
    _BUILT.clear()
