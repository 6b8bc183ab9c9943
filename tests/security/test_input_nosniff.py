"""Every JSON answer carries ``X-Content-Type-Options: nosniff`` (nothing a
model or a user supplied is served as a page), tried against gunicorn: success and
error answers of every API, the middleware's early answers, the 404 and 500 handlers,
the probes and the scrape, a 503 while the database is down, a refused Host."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests
from django.db import connection

from accounts.api.tokens import AccessToken
from tests.support.factories import UserFactory
from tests.support.ops import Gunicorn, PrivateRedis, gunicorn
from tests.support.runtime_fixtures import free_port
from tests.support.security.input import RUNTIME_TOKEN

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _sniffable(response: requests.Response) -> bool:
    return response.headers.get("X-Content-Type-Options") != "nosniff"


def _calls(server: Gunicorn, learner: str) -> dict[str, requests.Response]:
    url = server.url
    user = {"Authorization": f"Bearer {learner}"}
    runtime = {"Authorization": f"Bearer {RUNTIME_TOKEN}", "X-Runtime-Instance-Id": "rt-1"}
    return {
        "healthz": requests.get(url + "/healthz", timeout=10),
        "readyz": requests.get(url + "/readyz", timeout=10),
        "metrics": requests.get(url + "/metrics", timeout=10),
        "schema": requests.get(url + "/api/schema", params={"format": "json"}, timeout=10),
        "user 200": requests.get(url + "/ai/jobs", headers=user, timeout=10),
        "user 401": requests.get(url + "/ai/jobs", timeout=10),
        "user 400": requests.post(url + "/ai/jobs", json={"jobType": 1}, headers=user, timeout=10),
        "user 405": requests.delete(url + "/ai/settings", headers=user, timeout=10),
        "auth 400": requests.post(
            url + "/auth/token", data="[", headers={"Content-Type": "application/json"}, timeout=10
        ),
        "internal 200": requests.post(
            url + "/internal/runtime/jobs/poll", json={"capabilities": []}, headers=runtime, timeout=10
        ),
        "internal 404": requests.post(
            url + "/internal/runtime/jobs/job_nope/heartbeat", json={}, headers=runtime, timeout=10
        ),
        "asynch 401": requests.post(url + "/task/createTask", json={}, timeout=10),
        "404 handler": requests.get(url + "/no/such/path", timeout=10),
        "NUL in the path": requests.get(url + "/ai/jobs/a%00b", headers=user, timeout=10),
        "NUL in the query": requests.get(url + "/ai/jobs", params={"cursor": "a\x00"}, headers=user, timeout=10),
        "too large": requests.post(
            url + "/ai/jobs", data=b"x" * 3_000_000, headers={**user, "Content-Type": "application/json"}, timeout=30
        ),
    }


def test_every_json_answer_says_nosniff(tmp_path: Path):
    learner = str(AccessToken.for_user(UserFactory()))
    with gunicorn(tmp_path / "gunicorn.log", workers=1, env={"METRICS_TOKEN": "m" * 32}) as server:
        answers = _calls(server, learner)
        answers["metrics 200"] = server.get("/metrics", headers={"Authorization": "Bearer " + "m" * 32})
        answers["refused Host"] = server.get("/healthz", headers={"Host": "evil.example"})
    # As production runs it: SecurityMiddleware redirects to https, and fails on the Host itself.
    with gunicorn(tmp_path / "gunicorn-tls.log", workers=1, env={"SECURE_SSL_REDIRECT": "1"}) as server:
        answers["refused Host, https redirect on"] = server.get("/ai/jobs", headers={"Host": "evil.example"})
    assert answers["refused Host"].status_code == 400 == answers["refused Host, https redirect on"].status_code
    statuses = {name: response.status_code for name, response in answers.items()}
    assert statuses["metrics"] == 401 and statuses["too large"] == 400 and statuses["NUL in the query"] == 400
    assert [name for name, response in answers.items() if _sniffable(response)] == []
    kinds = {name: r.headers.get("Content-Type", "") for name, r in answers.items() if name != "metrics 200"}
    assert {name: kind for name, kind in kinds.items() if "json" not in kind} == {}  # errors too: the error body


def _admin_login(url: str) -> requests.Response:
    """A login posted to Django admin: its password check needs the database (outside DRF)."""
    session = requests.Session()
    page = session.get(url + "/admin/login/", timeout=30)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return session.post(
        url + "/admin/login/",
        data={"csrfmiddlewaretoken": token, "username": "operator", "password": "pw"},
        headers={"Referer": url + "/admin/login/"},
        timeout=30,
    )


def test_a_503_while_the_database_is_down_and_the_500_handler_say_nosniff(tmp_path: Path):
    if connection.vendor != "postgresql":
        pytest.skip("gunicorn serves the test database on PostgreSQL")
    learner = str(AccessToken.for_user(UserFactory()))
    redis_server = PrivateRedis(tmp_path).start()
    down = f"postgres://postgres@127.0.0.1:{free_port()}/nothing"
    try:
        with gunicorn(tmp_path / "gunicorn.log", workers=1, env={"REDIS_URL": redis_server.url}) as server:
            redis_server.stop()
            answers = {"readyz 503": requests.get(server.url + "/readyz", timeout=30)}
        with gunicorn(tmp_path / "gunicorn-2.log", workers=1, env={"DATABASE_URL": down}) as s:
            answers["database down, user API"] = requests.get(
                s.url + "/ai/jobs", headers={"Authorization": f"Bearer {learner}"}, timeout=30
            )
            answers["database down, admin (handler500)"] = _admin_login(s.url)
    finally:
        redis_server.stop()
    assert {name: r.status_code for name, r in answers.items()} == {
        "readyz 503": 503,
        "database down, user API": 503,
        "database down, admin (handler500)": 503,
    }
    assert [name for name, response in answers.items() if _sniffable(response)] == []
