"""DRF's content negotiation, with its most common case answered at once.

Almost every caller of the APIs sends ``Accept: */*`` (or no ``Accept``) and no
``?format=``: DRF's negotiation then parses the header, orders its media types by
precedence and matches each against each renderer, to pick the first renderer with its
own media type, every request. That case is recognised by its text and given the same
answer; any other ``Accept`` or a format goes through DRF's negotiation as before
(``tests/test_negotiation.py`` compares the two)."""

from __future__ import annotations

from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

_ANY = frozenset({None, "*/*"})


class ContentNegotiation(DefaultContentNegotiation):
    def select_renderer(
        self, request: Request, renderers: list[BaseRenderer], format_suffix: Any = None
    ) -> tuple[BaseRenderer, str]:
        if (
            renderers
            and not format_suffix
            and request.META.get("HTTP_ACCEPT") in _ANY
            and not request.query_params.get(self.settings.URL_FORMAT_OVERRIDE)
        ):
            renderer = renderers[0]
            return renderer, renderer.media_type
        return super().select_renderer(request, renderers, format_suffix)
