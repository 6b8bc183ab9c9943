"""The operators' dashboard and the breaker panel in a real browser (Debian's
chromium driven by Playwright), logged in as an operator, against a live server with
data: the charts have the expected number of points, the runtime that just
heartbeated is listed, the breaker's state and reason and the day's spend show,
the page redraws itself, and nothing is fetched from anywhere but the server.
Screenshots go to ``var/artifacts/``."""

from __future__ import annotations

import datetime as dt
import random
import re
from decimal import Decimal
from pathlib import Path

import pytest
import requests
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from ai_jobs.models import AiRuntimeJob, QueueSample
from asynch.models import AsynchTask
from ops import dashboard
from quotas import services as quotas
from tests.support.api import RUNTIME_TOKEN
from tests.support.asynch_fixtures import make_model, tenant_client
from tests.support.browser import ARTIFACTS, browser_fixture  # noqa: F401  (the browser fixture)
from tests.support.factories import JobFactory, UserFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUEUE_SAMPLES = 45


@pytest.fixture
def operator_page(browser, live_server):  # type: ignore[no-untyped-def]
    """A page logged in as a superuser (the session cookie of a real login)."""
    operator = get_user_model().objects.create_superuser("operator", "op@example.com", "pw")
    client = Client()
    client.force_login(operator)
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=1)
    host = live_server.url.split("//", 1)[1].split(":")[0]
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "domain": host, "path": "/"}]
    )
    page = context.new_page()
    page.requested = []  # type: ignore[attr-defined]
    page.on("request", lambda request: page.requested.append(request.url))  # type: ignore[attr-defined]
    yield page
    context.close()


def _seed(now: dt.datetime) -> dict[str, int]:
    """A day of history, a queue, leases, spend, and model-asynch tasks."""
    rng = random.Random(7)
    user = UserFactory()
    hour_starts = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=59)  # the hour chart's first bar
    rows, finished = [], {"succeeded": 0, "failed": 0, "cancelled": 0}
    codes = ["MODEL_TIMEOUT", "MODEL_RATE_LIMIT", "MODEL_RESPONSE_INVALID", "JOB_TIMEOUT", "INVALID_SNAPSHOT"]
    for minute in range(24 * 60):
        if 57 <= minute <= 61:
            # Quiet at the hour chart's left edge: the minute may turn between this seed
            # and the page's load, and the count below must not depend on it.
            continue
        at = now - dt.timedelta(minutes=minute, seconds=rng.randint(0, 50))
        busy = 6 if minute < 60 else (2 + (minute // 90) % 4)
        for _ in range(rng.randint(busy // 2, busy)):
            status = rng.choices(["succeeded", "failed", "cancelled"], weights=[90, 7, 3])[0]
            code = None if status == "succeeded" else ("JOB_CANCELLED" if status == "cancelled" else rng.choice(codes))
            rows.append(AiRuntimeJob(user=user, job_type="learning_state_analysis", target_type="user",
                                     target_id=str(user.pk), status=status, error_code=code, finished_at=at,
                                     created_at=at - dt.timedelta(seconds=40)))  # fmt: skip
            if at >= hour_starts:
                finished[status] += 1
    for n in range(18):
        job_type = ["learning_state_analysis", "quiz_generation", "flashcard_generation"][n % 3]
        rows.append(AiRuntimeJob(user=user, job_type=job_type, target_type="user", target_id=str(user.pk),
                                 created_at=now - dt.timedelta(seconds=30 + n * 25),
                                 available_at=now + dt.timedelta(minutes=2) if n % 6 == 5 else now))  # fmt: skip
    AiRuntimeJob.objects.bulk_create(rows, batch_size=2000)
    stale = JobFactory(user=user, status="running", locked_by="rt-stale-9", lock_until=now - dt.timedelta(seconds=20),
                       attempt_no=1)  # fmt: skip
    assert stale.status == "running"
    for minute in range(60):
        if minute % 4 != 3:  # a few minutes without a sample: gaps in the line
            QueueSample.objects.create(
                minute=(now - dt.timedelta(minutes=minute)).replace(second=0, microsecond=0),
                pending=20 + int(8 * abs(((minute % 20) - 10) / 10)), pending_due=18, locked=1, running=3,
            )  # fmt: skip
    assert QueueSample.objects.count() == QUEUE_SAMPLES
    quotas.platform_usage_add(tokens=3_456_789, cost_cents=Decimal("12345.6789"))
    for name, concurrency in (("whisper-large", 4), ("sdxl-render", 2)):
        make_model(name, max_concurrency=concurrency)
    acme = tenant_client("acme")
    for state, count in ((0, 7), (1, 2), (2, 5), (3, 1)):
        for _ in range(count):
            task_id = acme.create_task("whisper-large", {"audio": "a.wav"}).json()["taskId"]
            AsynchTask.objects.filter(id=task_id).update(state=state)
    return finished


def _runtime_heartbeats(base: str, instance: str) -> str:
    """A runtime claims a job and heartbeats it, through the live server's internal API."""
    headers = {"Authorization": f"Bearer {RUNTIME_TOKEN}", "x-runtime-instance-id": instance}
    claimed = requests.post(f"{base}/internal/runtime/jobs/claim", json={"capabilities": ["quiz_generation"],
                            "limit": 2}, headers=headers, timeout=10).json()["jobs"]  # fmt: skip
    assert claimed
    for job in claimed:
        beat = requests.post(
            f"{base}/internal/runtime/jobs/{job['jobId']}/heartbeat", json={}, headers=headers, timeout=10
        )
        assert beat.status_code == 200
    return claimed[0]["jobId"]


def _shot(page, name: str) -> Path:  # type: ignore[no-untyped-def]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


def test_the_dashboard_shows_the_platform_at_a_glance_and_redraws_itself(operator_page, live_server, monkeypatch):
    monkeypatch.setattr(dashboard, "REFRESH_SECONDS", 1)
    now = timezone.now()
    finished = _seed(now)
    _runtime_heartbeats(live_server.url, "rt-alpha-1")
    quotas.breaker_transition(to="open", actor="operator", reason="DeepSeek answers 503 since 14:02; paused by on-call")

    page = operator_page
    page.goto(f"{live_server.url}/admin/ai_jobs/airuntimejob/dashboard/")
    assert page.locator('svg[data-chart="throughput-hour"] .point').count() == 60
    assert page.locator('svg[data-chart="throughput-day"] .point').count() == 144
    assert page.locator('svg[data-chart="queue-depth"] .point').count() == QUEUE_SAMPLES
    legend = page.locator('[data-panel="throughput-hour"] .legend').inner_text()
    assert f"succeeded {finished['succeeded']}" in legend and f"failed {finished['failed']}" in legend

    alpha = page.locator('tr.runtime[data-instance="rt-alpha-1"]')
    assert alpha.count() == 1 and "stale" not in (alpha.get_attribute("class") or "")
    cells = alpha.locator("td").all_inner_texts()
    assert cells[1] == "2" and re.fullmatch(r"\ds ago", cells[3]), cells
    stale = page.locator('tr.runtime[data-instance="rt-stale-9"]').locator("td").all_inner_texts()
    assert stale[2] == "1"  # its lease lapsed
    assert page.locator('[data-tile="lapsed"] .big').inner_text() == "1"
    assert page.locator('[data-tile="runtimes"] .big').inner_text() == "1"

    assert page.locator("#breaker-state").inner_text().lower() == "open"
    assert "DeepSeek answers 503" in page.locator('[data-tile="breaker"]').inner_text()
    tokens = page.locator('[data-meter="tokens"]').inner_text()
    cost = page.locator('[data-meter="cost"]').inner_text()
    assert "3,456,789" in tokens and "10,000,000" in tokens and "34.6%" in tokens
    assert "$123.46" in cost and "$500.00" in cost and "24.7%" in cost
    whisper = page.locator('tr.asynch-model[data-model="whisper-large"] td').all_inner_texts()
    assert whisper[1:6] == ["7", "2", "0 / 4", "5", "1"], whisper
    assert page.locator(".error-row").count() == 5  # the five failure codes seeded; cancellations are no error
    assert page.locator('[data-tile="pending"] .big').inner_text() == "16"  # 18 made, 2 claimed
    _shot(page, "dashboard.png")

    # It redraws itself: a new job shows without a reload.
    JobFactory(job_type="quiz_generation")
    # A function, not an expression: Playwright evaluates an expression with eval, which the
    # page's Content-Security-Policy refuses.
    page.wait_for_function("() => document.querySelector('[data-tile=pending] .big').textContent.trim() === '17'",
                           timeout=10_000)  # fmt: skip
    assert all(url.startswith(live_server.url) for url in page.requested), page.requested

    page.goto(f"{live_server.url}/admin/ai_jobs/airuntimejob/dashboard/?wall=1")
    assert page.locator("#header").count() == 0 and page.locator('svg[data-chart="throughput-day"]').count() == 1
    _shot(page, "dashboard-wall.png")


def test_the_breaker_panel_shows_its_state_and_moves_it(operator_page, live_server):
    page = operator_page
    quotas.platform_usage_add(tokens=1_234_567, cost_cents=Decimal("250.5"))
    page.goto(f"{live_server.url}/admin/quotas/platformcircuitbreaker/")
    assert page.locator(".breaker-state").get_attribute("data-state") == "closed"
    assert "1,234,567 of 10,000,000" in page.locator("#content-main").inner_text()
    page.select_option("select[name=to_state]", "open")
    page.fill("textarea[name=reason]", "Provider incident: pausing the platform key")
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/admin/quotas/platformcircuitbreaker/$"))
    assert page.locator(".breaker-state").get_attribute("data-state") == "open"
    assert page.locator(".breaker-state").inner_text().lower() == "open"
    assert page.locator(".breaker-reason").inner_text() == "Provider incident: pausing the platform key"
    _shot(page, "breaker-panel.png")
    page.goto(f"{live_server.url}/admin/ai_jobs/airuntimejob/dashboard/")
    assert page.locator("#breaker-state").inner_text().lower() == "open"
    assert "Provider incident" in page.locator('[data-tile="breaker"]').inner_text()
    assert all(url.startswith(live_server.url) for url in page.requested), page.requested
