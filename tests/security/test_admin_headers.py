"""What the platform's answers tell a browser, read from outside against gunicorn: every
page of the admin (its login, the lockout, lists, a job, the breaker panel, the dashboard
and its redraws, a mistyped address) and the API docs carry the Content-Security-Policy
that admits this origin's scripts and styles only; every JSON answer, errors included
(404, 405, 400, 401, 415, a NUL in the path, 429), carries ``X-Content-Type-Options:
nosniff``, as the other answers do."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from accounts.api.tokens import AccessToken
from tests.support.factories import JobFactory, UserFactory
from tests.support.ops import Gunicorn
from tests.support.security.admin import POLICY, AdminSession, admin_gunicorn, logged_in, policy_of, staff

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Gunicorn]:  # type: ignore[no-untyped-def]
    # The user API's rate low enough to see its 429.
    env = {"USER_THROTTLE_RATE": "3/min"}
    with admin_gunicorn(tmp_path_factory.mktemp("admin-headers") / "gunicorn.log", env=env) as running:
        yield running


def test_every_admin_page_and_the_api_docs_carry_the_policy(server: Gunicorn):
    staff("operator", superuser=True)
    job = JobFactory(status="failed", error_code="MODEL_TIMEOUT")
    anonymous = AdminSession(server)
    pages = {"/admin/login/": anonymous.get("/admin/login/"), "/api/docs": anonymous.get("/api/docs")}
    operator = logged_in(server, "operator")
    for path in ["/admin/", "/admin/ai_jobs/airuntimejob/", f"/admin/ai_jobs/airuntimejob/{job.id}/change/",
                 "/admin/quotas/platformcircuitbreaker/", "/admin/ai_jobs/airuntimejob/dashboard/",
                 "/admin/ai_jobs/airuntimejob/dashboard/?partial=1", "/admin/nowhere/"]:  # fmt: skip
        pages[path] = operator.get(path)
    locked = AdminSession(server, address="192.0.2.1")
    for _ in range(5):
        pages["/admin/login/ (locked)"] = locked.login("operator", "a wrong guess")

    assert {path: page.status_code for path, page in pages.items()} == {
        **dict.fromkeys(pages, 200),
        "/admin/nowhere/": 404,
        "/admin/login/ (locked)": 429,
    }
    for path, page in pages.items():
        expected = {**POLICY, "img-src": "'self' data:"} if path == "/api/docs" else POLICY
        assert policy_of(page.headers.get("Content-Security-Policy", "")) == expected, path
        assert page.headers["X-Frame-Options"] == "DENY" and page.headers["X-Content-Type-Options"] == "nosniff"
    script = anonymous.get("/api/docs?script=")  # Swagger UI's start-up, served apart from its page
    assert script.status_code == 200 and script.headers["Content-Type"].startswith("application/javascript")


def test_every_json_answer_says_nosniff_errors_included(server: Gunicorn):
    token = {"Authorization": f"Bearer {AccessToken.for_user(UserFactory())}"}
    url = server.url

    def post(path: str, **kwargs: object) -> requests.Response:
        return requests.post(url + path, timeout=30, **kwargs)  # type: ignore[arg-type]

    answers = {
        "200 /healthz": requests.get(f"{url}/healthz", timeout=30),
        "404 unknown": requests.get(f"{url}/no/such/thing", timeout=30),
        "404 NUL in the path": requests.get(f"{url}/ai/jobs/job_%00", headers=token, timeout=30),
        "405": requests.get(f"{url}/auth/token", timeout=30),
        "400 validation": post("/auth/token", json={"username": ""}),
        "400 malformed JSON": post("/auth/token", data="{", headers={"Content-Type": "application/json"}),
        "415": post("/auth/token", data="x", headers={"Content-Type": "text/plain"}),
        "401": requests.get(f"{url}/ai/jobs", timeout=30),
    }
    for _ in range(4):  # USER_THROTTLE_RATE is 3/min here
        answers["429"] = requests.get(f"{url}/ai/jobs", headers=token, timeout=30)
    statuses = {name: answer.status_code for name, answer in answers.items()}
    assert statuses == {name: int(name.split()[0]) for name in answers}, statuses
    for name, answer in answers.items():
        assert answer.headers["Content-Type"].startswith("application/json"), name
        assert answer.headers.get("X-Content-Type-Options") == "nosniff", name
