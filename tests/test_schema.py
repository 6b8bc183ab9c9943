"""The OpenAPI schema and docs of contract §1."""

import pytest

pytestmark = pytest.mark.django_db


def test_the_schema_lists_every_internal_endpoint(client):
    response = client.get("/api/schema", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in ("poll", "claim", "{job_id}/lock", "{job_id}/heartbeat", "{job_id}/snapshot", "{job_id}/credential",
                 "{job_id}/result", "{job_id}/fail", "{job_id}/invocation-logs"):  # fmt: skip
        assert f"/internal/runtime/jobs/{path}" in paths


def test_the_docs_page_is_served(client):
    response = client.get("/api/docs")
    assert response.status_code == 200 and b"swagger" in response.content.lower()


def test_the_schema_is_valid_openapi_without_a_single_warning(tmp_path):
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert (tmp_path / "schema.yaml").read_text().startswith("openapi: 3")
