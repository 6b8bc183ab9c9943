"""The OpenAPI schema view: the schema is built once per process, and each of its
formats (YAML, JSON) rendered once; every later request gets those very bytes (contract
sections 1 and 10), so a caller cannot make the server spend a generation on a request.
``?version=`` changes nothing: the API has one version.

drf-spectacular's generator keeps state in class attributes (lazily loaded extension
classes, generator statistics) and is not thread-safe (tfranzel/drf-spectacular#1368,
#1123): two first requests at once in one gunicorn worker's threads could fail with a
500. The lock makes the first request build and the others wait for its bytes."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework.request import Request


class SchemaView(SpectacularAPIView):
    _lock = threading.Lock()
    _schema: ClassVar[dict[str, Any] | None] = None
    _rendered: ClassVar[dict[str, tuple[bytes, str, str]]] = {}  # media type -> (body, content type, filename)

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        renderer = request.accepted_renderer
        key = renderer.media_type
        with self._lock:
            if key not in self._rendered:
                cls = type(self)
                if cls._schema is None:
                    cls._schema = self._get_schema_response(request).data
                body = renderer.render(cls._schema, renderer_context={"request": request, "view": self})
                content_type = f"{renderer.media_type}; charset={renderer.charset}" if renderer.charset else key
                cls._rendered[key] = (body, content_type, self._get_filename(request, None))
            body, content_type, filename = self._rendered[key]
        response = HttpResponse(body, content_type=content_type)
        response["Content-Disposition"] = f'inline; filename="{filename}"'
        return response

    @classmethod
    def forget(cls) -> None:
        """For tests that change what the schema describes (a setting, a registry)."""
        with cls._lock:
            cls._schema = None
            cls._rendered = {}


def forget_built_schemas() -> None:
    """For tests that change what the schema documents in one process."""
    SchemaView.forget()
