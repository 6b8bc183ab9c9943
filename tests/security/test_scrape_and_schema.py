"""Scrape over TLS, and a schema built once (contract section 10):

- With ``SECURE_SSL_REDIRECT`` on, ``GET /metrics`` with its bearer token over plain
  HTTP is redirected to https, answering nothing (gunicorn): the token is not taken in
  clear; the probes (``/healthz``, ``/readyz``) still answer plain HTTP.
- ``/api/schema`` is generated once per process: a caller asking again and again, with
  any ``?version=`` or format, costs no new generation."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from drf_spectacular.generators import SchemaGenerator

from config.schema import forget_built_schemas
from tests.support.ops import gunicorn

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "scrape-token-" + "s" * 32


@pytest.mark.slow
def test_metrics_with_its_token_over_plain_http_is_redirected_to_https(tmp_path: Path):
    env = {"SECURE_SSL_REDIRECT": "1", "METRICS_TOKEN": TOKEN}
    with gunicorn(tmp_path / "gunicorn.log", workers=1, env=env) as server:
        scrape = server.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, allow_redirects=False)
        probe = server.get("/healthz", allow_redirects=False)
    assert scrape.status_code == 301, scrape.text[:500]
    assert scrape.headers["Location"].startswith("https://") and scrape.headers["Location"].endswith("/metrics")
    assert "aijobs_" not in scrape.text  # nothing of the metrics came back
    assert probe.status_code == 200


def test_the_schema_is_generated_once_per_process(monkeypatch: pytest.MonkeyPatch):
    generations = []
    real = SchemaGenerator.get_schema

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        generations.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SchemaGenerator, "get_schema", counted)
    forget_built_schemas()
    client = Client()
    first = client.get("/api/schema", HTTP_ACCEPT="application/json")
    assert first.status_code == 200 and "paths" in first.json()
    for query in ({}, {"version": "1"}, {"version": "x" * 100}, {"format": "json"}, {"format": "yaml"}):
        again = client.get("/api/schema", query)
        assert again.status_code == 200, (query, again.content[:300])
    assert client.get("/api/schema", HTTP_ACCEPT="application/json").json() == first.json()
    assert len(generations) == 1
