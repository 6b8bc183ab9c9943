"""Content negotiation (``config.negotiation``): the shortcut for ``Accept: */*`` gives
what DRF's own negotiation gives, and every other ``Accept`` or format still goes
through DRF's (an ``Accept`` no renderer meets is still refused, as the error handler renders it)."""

from __future__ import annotations

import pytest
from django.http import Http404
from rest_framework import exceptions
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer, StaticHTMLRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from config.negotiation import ContentNegotiation
from tests.support.api import error_code

pytestmark = [pytest.mark.embedded]

ACCEPTS = [None, "*/*", "", "application/json", "text/html", "application/*", "text/plain", "*/*;q=0.1", "image/png"]
RENDERER_SETS = [[JSONRenderer()], [StaticHTMLRenderer(), JSONRenderer()], [JSONRenderer(), BrowsableAPIRenderer()]]


def _choice(negotiation: DefaultContentNegotiation, renderers: list, accept: str | None, query: str):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(APIRequestFactory().get(f"/ai/jobs{query}", **headers))
    try:
        renderer, media_type = negotiation.select_renderer(request, renderers)
    except exceptions.NotAcceptable:
        return "406"
    except Http404:  # a format no renderer has
        return "404"
    return type(renderer), media_type


@pytest.mark.parametrize("query", ["", "?format=json", "?format=html", "?format="])
@pytest.mark.parametrize("accept", ACCEPTS)
def test_the_shortcut_chooses_what_drf_chooses(accept, query):
    for renderers in RENDERER_SETS:
        assert _choice(ContentNegotiation(), renderers, accept, query) == _choice(
            DefaultContentNegotiation(), renderers, accept, query
        )


@pytest.mark.django_db
def test_an_api_answers_json_to_any_and_refuses_what_it_cannot_give(client):
    assert client.get("/healthz", HTTP_ACCEPT="*/*")["Content-Type"] == "application/json"
    refused = client.get("/ai/jobs", HTTP_ACCEPT="image/png")  # nothing the API can send: refused first
    assert refused.status_code == 400 and error_code(refused) == "VALIDATION_ERROR"
