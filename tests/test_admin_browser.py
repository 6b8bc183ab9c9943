"""The admin as an operator meets it, in a real browser (Debian's chromium through
Playwright, as the dashboard's tests): log in through the login form; the job list fits
1,400 pixels with nothing clipped and says what was rerun as what; a finished job's page
is read-only (no Save, no Delete, no "Add another"), with money in dollars and token
counts with separators; a failed job's page reruns it, once (a second rerun, from a
page opened before the first, is refused with a message); the breaker panel moves to
half-open and shows it, selected and coloured, with "2 of 2 allowed"; a mistyped admin
address is an admin page. Screenshots go to ``var/artifacts/``."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from ai_jobs import services as jobs
from ai_jobs.models import AiInvocationLog, AiRuntimeJob, AiRuntimeResult
from quotas import services as quotas
from tests.support.browser import ARTIFACTS, browser_fixture  # noqa: F401  (the browser fixture)
from tests.support.factories import JobFactory, UserFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WIDTH = 1400
CODES = ["MODEL_RESPONSE_INVALID", "CREDENTIAL_RESOLVE_FAILED", "MODEL_JSON_PARSE_FAILED", "JOB_TIMEOUT"]


@pytest.fixture
def logged_in(browser, live_server):  # type: ignore[no-untyped-def]
    """A browser context logged in through the admin's own login form."""
    get_user_model().objects.create_superuser("operator", "op@example.com", "correct horse")
    context = browser.new_context(viewport={"width": WIDTH, "height": 900}, device_scale_factor=1)
    page = context.new_page()
    page.goto(f"{live_server.url}/admin/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "correct horse")
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/admin/$"))
    yield context
    context.close()


def _shot(page, name: str) -> None:  # type: ignore[no-untyped-def]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def _queue(now: dt.datetime) -> dict[str, AiRuntimeJob]:
    """A queue an operator would see: every state, long names, a failed job made to fail
    by a stand-in marker, one already rerun, a finished one with its result and logs."""
    ada = UserFactory(username="ada.lovelace.analytical")
    grace = UserFactory(username="grace")
    for n in range(14):
        status = ["pending", "running", "succeeded", "failed", "cancelled", "locked", "expired"][n % 7]
        JobFactory(
            user=[ada, grace][n % 2],
            job_type=["learning_state_analysis", "flashcard_generation", "weak_point_analysis"][n % 3],
            status=status,
            api_key_mode="user_deepseek_key",  # not the platform's: the breaker panel counts only its own
            error_code=CODES[n % 4] if status == "failed" else None,
            error_message="the model's output misses 'masteryScore'" if status == "failed" else None,
            attempt_no=n % 4,
            retry_count=n % 3,
            created_at=now - dt.timedelta(minutes=n),
        )
    failed = JobFactory(
        user=ada,
        job_type="quiz_generation",
        target_type="knowledge_base",
        target_id="kb_01m8rm3neqa4630v4drmcxhm5k",
        status="failed",
        error_code="MODEL_RESPONSE_INVALID",
        error_message="The model's output does not match the quiz_generation v1 schema",
        params={"questionCount": 5, "note": "exam prep [standin:invalid_output]"},
        attempt_no=4,
        retry_count=3,
        finished_at=now,
        created_at=now - dt.timedelta(seconds=5),
    )
    earlier = JobFactory(
        user=grace, status="failed", error_code="MODEL_TIMEOUT", created_at=now - dt.timedelta(hours=1)
    )
    second = jobs.job_rerun(job=earlier)  # it failed too, with the longest code, and was rerun in turn
    AiRuntimeJob.objects.filter(id=second.id).update(status="failed", error_code="CREDENTIAL_RESOLVE_FAILED")
    second.refresh_from_db()
    jobs.job_rerun(job=second)
    done = JobFactory(user=grace, status="succeeded", attempt_no=1, started_at=now, finished_at=now)
    AiRuntimeResult.objects.create(
        job=done, attempt_no=1, idempotency_key=f"{done.id}:1:x", output_hash="x", output_schema_version="v1",
        output={"summary": "ok"}, prompt_tokens=10_000, completion_tokens=2_345, total_tokens=12_345,
        cost_cents=Decimal("46.6400"), runtime_instance_id="rt-1",
    )  # fmt: skip
    AiInvocationLog.objects.create(job=done, attempt_no=1, runtime_instance_id="rt-1", http_status=200,
                                   total_tokens=12_345, cost_cents=Decimal("46.6400"))  # fmt: skip
    return {"failed": failed, "earlier": earlier, "done": done}


def test_an_operator_reads_the_queue_reruns_a_failed_job_once_and_half_opens_the_breaker(logged_in, live_server):
    now = timezone.now()
    seeded = _queue(now)
    failed, earlier, done = seeded["failed"], seeded["earlier"], seeded["done"]
    page = logged_in.new_page()
    missing: list[str] = []  # every 404 the pages caused (a missing favicon or stylesheet too)
    logged_in.on("response", lambda answer: missing.append(answer.url) if answer.status == 404 else None)
    base = f"{live_server.url}/admin/ai_jobs/airuntimejob"

    # The list fits 1,400 px: no horizontal scroll, no cell cut off, the lineage column shown.
    page.goto(f"{base}/")
    _shot(page, "admin-job-list.png")
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    results = page.locator("#changelist .results")
    assert results.evaluate("r => r.scrollWidth <= r.clientWidth"), "the list scrolls sideways"
    assert page.locator("#result_list").evaluate(
        "t => t.getBoundingClientRect().right <= document.querySelector('#changelist-filter').getBoundingClientRect().left"
    )
    clipped = page.evaluate(
        "[...document.querySelectorAll('#result_list td, #result_list th')]"
        ".filter(cell => cell.scrollWidth > cell.clientWidth + 1).map(cell => cell.textContent.trim())"
    )
    assert clipped == []
    headers = [h.strip().lower() for h in page.locator("#result_list thead th").all_inner_texts()]
    assert "retried from · rerun as" in headers and "error" in headers

    def row(job: AiRuntimeJob):  # type: ignore[no-untyped-def]
        return page.locator("#result_list tbody tr").filter(has=page.locator("td.field-job", has_text=job.id))

    second = AiRuntimeJob.objects.get(retried_from_job=earlier)
    third = AiRuntimeJob.objects.get(retried_from_job=second)
    assert f"↪ {second.id}" in row(earlier).inner_text()
    assert f"↩ {earlier.id}\n↪ {third.id}" in row(second).inner_text()
    assert "CREDENTIAL_RESOLVE_FAILED" in row(second).inner_text()
    assert "MODEL_RESPONSE_INVALID" in row(failed).inner_text()
    _shot(page, "admin-job-list.png")

    # A finished job's page is read-only, with money and tokens as people read them.
    page.goto(f"{base}/{done.id}/change/")
    assert page.locator("input[name=_save], input[name=_continue], .deletelink").count() == 0
    assert "Add another" not in page.locator("body").inner_text()
    assert page.locator(".rerun-button").count() == 0  # it succeeded: nothing to rerun
    text = page.locator("#content-main").inner_text()
    assert "12,345 (10,000 + 2,345)" in text and "$0.47" in text
    _shot(page, "admin-finished-job.png")

    # A failed job's page reruns it; a page opened before that cannot rerun it again.
    page.goto(f"{base}/{failed.id}/change/")
    stale = logged_in.new_page()
    stale.goto(f"{base}/{failed.id}/change/")
    assert page.locator("input[name=_save], .deletelink").count() == 0
    _shot(page, "admin-failed-job.png")
    page.click(".rerun-button")
    rerun = AiRuntimeJob.objects.get(retried_from_job=failed)
    page.wait_for_url(re.compile(rf"/{rerun.id}/change/$"))
    assert f"Job {failed.id} rerun as {rerun.id}, pending." in page.locator(".messagelist").inner_text()
    assert rerun.params == {"questionCount": 5, "note": "exam prep"}  # the stand-in's marker left behind
    assert f"Rerun of {failed.id}" in page.locator(".object-tools").inner_text()
    _shot(page, "admin-rerun.png")

    stale.click(".rerun-button")
    stale.wait_for_url(re.compile(rf"/{failed.id}/change/$"))
    refused = stale.locator(".messagelist .error").inner_text()
    assert f"Not rerun: Job {failed.id} was already rerun as {rerun.id}." in refused
    assert stale.locator(".rerun-button").count() == 0
    assert stale.locator(".object-tools a.rerun-done").inner_text() == f"Rerun as {rerun.id}"
    assert AiRuntimeJob.objects.filter(retried_from_job=failed).count() == 1
    _shot(stale, "admin-rerun-refused.png")
    stale.close()

    # The breaker panel: open, then half-open by hand, with as many platform-key jobs active as it allows.
    quotas.breaker_transition(to="open", actor="system", reason="10 consecutive platform-key model failures")
    quotas.platform_usage_add(tokens=1_234_567, cost_cents=Decimal("46.64"))
    # Two reruns are the platform-key jobs active now (the rest of the queue uses users' keys).
    page.goto(f"{live_server.url}/admin/quotas/platformcircuitbreaker/")
    assert page.locator("select[name=to_state]").input_value() == "open"
    page.select_option("select[name=to_state]", "half_open")
    page.fill("textarea[name=reason]", "DeepSeek recovered at 14:20; letting two jobs through")
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/admin/quotas/platformcircuitbreaker/$"))
    badge = page.locator(".breaker-state")
    assert badge.get_attribute("data-state") == "half_open" and badge.inner_text().lower() == "half open"
    assert badge.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(154, 103, 0)"
    assert page.locator("select[name=to_state]").input_value() == "half_open"
    assert page.locator(".breaker-admission").inner_text() == "2 of 2 allowed while half-open"
    assert page.locator(".breaker-tokens").inner_text() == "1,234,567 of 10,000,000 (12.3%)"
    assert page.locator(".breaker-cost").inner_text() == "$0.47 of $500.00 (0.1%)"
    _shot(page, "admin-breaker-half-open.png")

    # A mistyped admin address is an admin page, not the API's JSON.
    response = page.goto(f"{live_server.url}/admin/ai_jobs/airuntimejobz/")
    assert response is not None and response.status == 404
    assert "text/html" in response.headers["content-type"]
    assert page.locator("#header #site-name").inner_text() == "AI job platform"
    assert page.locator("h1").inner_text() == "Page not found"
    assert "/admin/ai_jobs/airuntimejobz/" in page.locator("#content-main").inner_text()
    _shot(page, "admin-404.png")
    assert missing == [f"{live_server.url}/admin/ai_jobs/airuntimejobz/"]


def _no_text_cut_off(page, selector: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The texts under ``selector`` wider than their box, or past their tile's edge."""
    return page.evaluate(
        """(selector) => [...document.querySelectorAll(selector)].filter(el => {
             const box = el.getBoundingClientRect(), tile = el.closest('.tile, td, th') || el.parentElement;
             const edge = tile.getBoundingClientRect();
             return el.scrollWidth > el.clientWidth + 1 || box.right > edge.right + 1;
           }).map(el => el.textContent.trim())""",
        selector,
    )


def test_the_admins_rough_edges_one_name_seconds_pretty_output_nothing_cut_off(logged_in, live_server):
    """What a newcomer tripped over: the home page names neither the dashboard nor the breaker;
    a breaker never changed says "last change ... —" beside "no changes yet"; one dashboard
    has three names; a job's output is one long line; times stop at the minute; the dashboard's
    runtime tile and the task list cut text off at 1,400 px."""
    from asynch.models import AsynchTask
    from tests.support.asynch_fixtures import make_model, tenant_client

    now = timezone.now()
    done = JobFactory(status="succeeded", attempt_no=1, started_at=now, finished_at=now)
    output = {"summary": "Fractions are fine", "strengths": ["adding", "halves"], "masteryScore": 72}
    AiRuntimeResult.objects.create(
        job=done, attempt_no=1, idempotency_key=f"{done.id}:1:y", output_hash="y", output_schema_version="v1",
        output=output, total_tokens=1, cost_cents=Decimal("0.0100"), runtime_instance_id="rt-1",
    )  # fmt: skip
    make_model("whisper-large-v3-multilingual-transcription", max_concurrency=2)
    acme = tenant_client("acme-learning-platform-production")
    for n in range(3):
        created = acme.create_task(
            "whisper-large-v3-multilingual-transcription", {"audio": "a.wav"},
            bizName="lesson-transcripts-nightly-batch", creator=f"usr_01jb7q9x3yteacherassistant{n}",
        ).json()  # fmt: skip
        AsynchTask.objects.filter(id=created["taskId"]).update(
            state=3, error_message="Model service answered 503 Service Unavailable after 3 retries (upstream timeout)"
        )
    page = logged_in.new_page()

    # The home page links the dashboard and the breaker.
    page.goto(f"{live_server.url}/admin/")
    shortcuts = page.locator(".admin-shortcuts")
    assert shortcuts.locator("a").all_inner_texts() == ["Operations dashboard", "Breaker panel"]
    _shot(page, "admin-index.png")

    # A breaker never changed: its first state and since when, no dashes.
    shortcuts.locator("a", has_text="Breaker panel").click()
    page.wait_for_url(re.compile(r"/admin/quotas/platformcircuitbreaker/$"))
    last = page.locator("tr", has=page.locator("th", has_text="Last change")).locator("td").inner_text()
    assert "—" not in last and last.startswith("none yet: closed since"), last
    assert "No changes yet." in page.locator("#content-main").inner_text()
    assert re.search(r"\d\d:\d\d:\d\d", last), last  # with its seconds
    _shot(page, "admin-breaker-fresh.png")

    # One dashboard, one name: wherever it is linked, titled or shown.
    page.goto(f"{live_server.url}/admin/")
    page.locator(".admin-shortcuts a", has_text="Operations dashboard").click()
    page.wait_for_url(re.compile(r"/dashboard/$"))
    assert page.title().startswith("Operations dashboard")
    assert page.locator(".breadcrumbs").inner_text().endswith("Operations dashboard")
    assert page.locator(".ops h1").inner_text().startswith("Operations dashboard")
    for path in ("/admin/ai_jobs/airuntimejob/", "/admin/quotas/platformcircuitbreaker/", "/admin/no-such-page/"):
        page.goto(live_server.url + path)
        names = page.locator("a[href='/admin/ai_jobs/airuntimejob/dashboard/']").all_text_contents()
        assert names and set(names) == {"Operations dashboard"}, (path, names)

    # The dashboard at 1,400 px: no tile's text past its edge (the runtime tile's was).
    page.goto(f"{live_server.url}/admin/ai_jobs/airuntimejob/dashboard/")
    _shot(page, "admin-dashboard-1400.png")
    assert _no_text_cut_off(page, ".tile .sub, .tile .label, .tile .big") == []
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH

    # The model-asynch task list at 1,400 px: no cell cut off, no sideways scroll.
    page.goto(f"{live_server.url}/admin/asynch/asynchtask/")
    assert page.locator("#result_list tbody tr").count() == 3
    _shot(page, "admin-task-list.png")
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    assert page.locator("#changelist .results").evaluate("r => r.scrollWidth <= r.clientWidth")
    assert _no_text_cut_off(page, "#result_list td, #result_list th") == []
    created = page.locator("#result_list td.field-times").first.inner_text()
    assert re.search(r"\d\d:\d\d:\d\d", created), created  # times with seconds

    # A job's output, indented.
    page.goto(f"{live_server.url}/admin/ai_jobs/airuntimejob/{done.id}/change/")
    shown = page.locator("pre.json").first.inner_text()
    assert json.loads(shown) == output and '\n  "strengths": [\n    "adding",' in shown
    _shot(page, "admin-job-output.png")
