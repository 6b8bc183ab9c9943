"""``GET /`` names the API docs, the schema and the admin; no path answers Django's debug
page of URL patterns, ``DEBUG`` on or off (contract §1)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

DEBUG_PAGE = (b"URLconf", b"Django tried these URL patterns", b"api/schema", b"technical_404")


@pytest.fixture(params=[True, False], ids=["debug", "no-debug"])
def debug(request: pytest.FixtureRequest, settings) -> bool:  # type: ignore[no-untyped-def]
    settings.DEBUG = request.param
    return request.param


def test_the_front_door_is_a_small_page_naming_the_docs_the_schema_and_the_admin(client, debug):
    page = client.get("/", HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    for link in ("/api/docs", "/api/schema", "/admin/"):
        assert f'href="{link}"'.encode() in page.content
    assert (
        "script-src" not in page["Content-Security-Policy"] and "default-src 'none'" in page["Content-Security-Policy"]
    )
    assert client.get("/").status_code == 200  # curl's */*: the page


def test_a_client_that_asks_for_json_gets_the_same_as_json(client, debug):
    answer = client.get("/", HTTP_ACCEPT="application/json")
    assert answer.status_code == 200 and answer["Vary"] == "Accept"
    assert answer.json() == {
        "name": "AI job platform",
        "docs": "/api/docs",
        "schema": "/api/schema",
        "admin": "/admin/",
    }


def test_a_post_to_the_front_door_is_the_contracts_405(client, debug):
    answer = client.post("/", {})
    assert answer.status_code == 405 and answer.json()["error"]["code"] == "METHOD_NOT_ALLOWED"


@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_a_path_that_is_nothing_is_the_contracts_404_never_the_debug_page(client, debug, method):
    answer = getattr(client, method)("/no-such-path")
    assert answer.status_code == 404
    assert answer.json() == {"error": {"code": "NOT_FOUND", "message": "Not found", "retryable": False}}
    assert not any(marker in answer.content for marker in DEBUG_PAGE)


def test_an_admin_page_that_is_nothing_is_the_admins_404_never_the_debug_page(admin_client, debug):
    for path in ("/admin/no-such-page/", "/admin/r/999999/1/"):  # no pattern; a view that raises Http404
        answer = admin_client.get(path)
        assert answer.status_code == 404, path
        assert b"Page not found" in answer.content and b"Back to the admin" in answer.content
        assert not any(marker in answer.content for marker in DEBUG_PAGE), path
