"""Each request is logged in one line at most, a ``4xx`` in one warning line with its
request id (contract §1), seen from outside: gunicorn with the project's config, and the
log it writes."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.ops import gunicorn
from tests.support.runtime_fixtures import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_post_of_a_job_with_a_bad_job_type_writes_one_warning_line(tmp_path: Path):
    env = {"LOG_FORMAT": "json", "ALLOW_REGISTRATION": "true"}
    with gunicorn(tmp_path / "gunicorn.log", workers=1, env=env) as server:
        login = requests.post(
            f"{server.url}/auth/register",
            json={"username": f"one-line-{uuid.uuid4().hex[:8]}", "password": "a-Long-enough-passw0rd"},
            timeout=10,
        )
        assert login.status_code == 201
        bad, fine = f"bad-{uuid.uuid4().hex[:8]}", f"fine-{uuid.uuid4().hex[:8]}"
        refused = requests.post(
            f"{server.url}/ai/jobs",
            json={"jobType": "no_such_type", "targetType": "user", "targetId": "me"},
            headers={"Authorization": f"Bearer {login.json()['access']}", "X-Request-ID": bad},
            timeout=10,
        )
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "INVALID_JOB_TYPE"
        assert requests.get(f"{server.url}/healthz", headers={"X-Request-ID": fine}, timeout=10).status_code == 200

        def written() -> list[dict[str, Any]] | None:
            records = [json.loads(line) for line in server.lines() if line.startswith("{")]
            return records if any(r.get("requestId") == fine for r in records) else None

        records = wait_for(written, timeout=10, what="the health check's line")  # written after the job's
    [line] = [r for r in records if r.get("requestId") == bad or bad in r["message"]]
    assert line["level"] == "WARNING" and "POST /ai/jobs 400" in line["message"], line
    [ok] = [r for r in records if r.get("requestId") == fine]
    assert ok["level"] == "INFO" and "GET /healthz 200" in ok["message"]


def test_a_failed_admin_login_is_one_line_and_the_lockout_library_adds_none(tmp_path: Path):
    with gunicorn(tmp_path / "gunicorn.log", workers=1, env={"LOG_FORMAT": "json"}) as server:
        session = requests.Session()
        session.get(f"{server.url}/admin/login/", timeout=10)
        tried = f"login-{uuid.uuid4().hex[:8]}"
        answer = session.post(
            f"{server.url}/admin/login/?next=/admin/",
            data={"username": "nobody", "password": "wrong", "csrfmiddlewaretoken": session.cookies["csrftoken"]},
            headers={"Referer": f"{server.url}/admin/login/", "X-Request-ID": tried},
            timeout=10,
        )
        assert answer.status_code == 200 and "Please enter the correct username" in answer.text

        def written() -> list[dict[str, Any]] | None:
            records = [json.loads(line) for line in server.lines() if line.startswith("{")]
            return records if any(r.get("requestId") == tried for r in records) else None

        records = wait_for(written, timeout=10, what="the login's line")
    assert [r["message"].split(" ")[:3] for r in records if r.get("requestId") == tried] == [
        ["POST", "/admin/login/?next=/admin/", "200"]
    ]
    assert not [r for r in records if r["logger"].startswith("axes")]
