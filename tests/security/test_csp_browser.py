"""The admin under its Content-Security-Policy, in a real browser (Debian's chromium
through Playwright) against gunicorn serving the collected static files as in
production: an operator logs in through the form, reads the index, selects rows and runs
an action on the job list, reruns a failed job from its page, moves the breaker (its
select painted by its script), watches the dashboard redraw itself, opens a change form
with Django's widgets, a list with its date hierarchy and filters, the API docs (Swagger
UI) and a mistyped address. Every page carries the policy (scripts, styles and the rest
from this origin only), and not one console message or ``securitypolicyviolation``
event happens on any of them. Screenshots go to ``var/artifacts/csp-*.png``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from ai_jobs.models import AiRuntimeJob
from asynch.models import AsynchTask
from asynch.services import tenant_create
from quotas import services as quotas
from tests.support.browser import ARTIFACTS, browser_fixture  # noqa: F401  (the browser fixture)
from tests.support.factories import JobFactory
from tests.support.ops import Gunicorn
from tests.support.security.admin import PASSWORD, POLICY, admin_gunicorn, collected_static, policy_of, staff

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Reported to the test from the page, whichever page it is (an init script runs before any of its own).
REPORTER = """
document.addEventListener("securitypolicyviolation", (e) => window.reportViolation({
  page: document.location.pathname, directive: e.violatedDirective, blocked: e.blockedURI,
  source: e.sourceFile, line: e.lineNumber, sample: e.sample,
}));
"""


@dataclass
class Watched:
    """Everything the browser said while the test drove it."""

    console: list[str] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    documents: dict[str, dict[str, str]] = field(default_factory=dict)  # path → the response's headers


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Gunicorn]:  # type: ignore[no-untyped-def]
    var = collected_static(tmp_path_factory.mktemp("var"))
    with admin_gunicorn(var / "gunicorn.log", env={"VAR_DIR": str(var)}) as running:
        yield running


@pytest.fixture
def page(browser, server: Gunicorn):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1400, "height": 900}, device_scale_factor=1)
    watched = Watched()
    context.expose_binding("reportViolation", lambda source, violation: watched.violations.append(violation))
    context.add_init_script(script=REPORTER)

    def on_response(response: Any) -> None:
        if response.request.resource_type == "document":
            watched.documents[response.url.removeprefix(server.url)] = response.all_headers()

    context.on("response", on_response)
    page = context.new_page()
    page.on("console", lambda message: watched.console.append(f"{page.url} {message.type}: {message.text}"))
    page.on("pageerror", lambda error: watched.console.append(f"{page.url} error: {error}"))
    page.watched = watched  # type: ignore[attr-defined]
    yield page
    context.close()


def _shot(page, name: str) -> None:  # type: ignore[no-untyped-def]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"csp-{name}.png"), full_page=True)


def _settle(page) -> None:  # type: ignore[no-untyped-def]
    """Whatever the page loads has loaded, and a violation it caused has been reported."""
    page.wait_for_load_state("networkidle")
    page.evaluate("new Promise(requestAnimationFrame)")


def test_every_admin_page_works_under_a_same_origin_policy_with_nothing_blocked(page, server: Gunicorn):
    staff("operator", superuser=True)
    failed = JobFactory(status="failed", error_code="MODEL_TIMEOUT", attempt_no=1, finished_at=timezone.now())
    pending = JobFactory()
    tenant = tenant_create(name="acme")
    AsynchTask.objects.create(tenant=tenant, model_name="model-service", state=3)
    quotas.platform_usage_add(tokens=3_456_789, cost_cents=Decimal("12345.6789"))
    base = server.url

    page.goto(f"{base}/admin/login/?next=/admin/")
    _settle(page)
    _shot(page, "login")
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/admin/$"))
    _settle(page)
    assert page.locator("#site-name").inner_text() == "AI job platform"
    _shot(page, "index")

    # The job list's action form: actions.js counts the selection, the action runs.
    page.goto(f"{base}/admin/ai_jobs/airuntimejob/")
    _settle(page)
    page.check(f'input.action-select[value="{pending.id}"]')
    assert page.locator(".action-counter").inner_text().startswith("1 of 2 selected")
    page.select_option("select[name=action]", "cancel_jobs")
    _shot(page, "job-list")
    page.click("button[name=index]")
    page.wait_for_selector(".messagelist")
    _settle(page)
    assert "1 pending job(s) cancelled" in page.locator(".messagelist").inner_text()
    assert AiRuntimeJob.objects.get(id=pending.id).status == "cancelled"

    # A failed job's page and its Rerun button.
    page.goto(f"{base}/admin/ai_jobs/airuntimejob/{failed.id}/change/")
    _settle(page)
    _shot(page, "job")
    page.click(".rerun-button")
    rerun = AiRuntimeJob.objects.get(retried_from_job=failed)
    page.wait_for_url(re.compile(rf"/{rerun.id}/change/$"))
    _settle(page)

    # The breaker panel: its stylesheet colours the badge, its script the select.
    page.goto(f"{base}/admin/quotas/platformcircuitbreaker/")
    _settle(page)
    page.select_option("select[name=to_state]", "half_open")
    select = page.locator("select[name=to_state]")
    assert select.get_attribute("class") == "half_open"
    assert select.evaluate("s => getComputedStyle(s).color") == "rgb(154, 103, 0)"
    page.fill("textarea[name=reason]", "letting two jobs through")
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/admin/quotas/platformcircuitbreaker/$"))
    _settle(page)
    badge = page.locator(".breaker-state")
    assert badge.get_attribute("data-state") == "half_open"
    assert badge.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(154, 103, 0)"
    _shot(page, "breaker")

    # The dashboard: the day's spend drawn to scale, and it redraws itself (every 5 s).
    page.goto(f"{base}/admin/ai_jobs/airuntimejob/dashboard/")
    _settle(page)
    share = page.locator('[data-meter="tokens"] .bar').evaluate(
        "bar => bar.querySelector('rect').getBoundingClientRect().width / bar.getBoundingClientRect().width"
    )
    assert abs(share - 0.3457) < 0.01, share
    errors = page.locator(".error-row svg.hbar rect")
    assert errors.count() == 1 and errors.evaluate("r => getComputedStyle(r).fill") != "rgb(0, 0, 0)"
    assert page.locator('[data-tile="pending"] .big').inner_text() == "1"  # the rerun
    JobFactory()
    page.wait_for_function(
        "() => document.querySelector('[data-tile=pending] .big').textContent.trim() === '2'", timeout=20_000
    )
    _settle(page)
    _shot(page, "dashboard")

    # Django's widgets and lists: a raw-id lookup and a date hierarchy with filters.
    page.goto(f"{base}/admin/learning/studyrecord/add/")
    _settle(page)
    assert page.locator("a.related-lookup").count() == 2  # the user, the knowledge point
    page.click("a[id^=calendarlink]")  # Django's calendar, drawn by its script
    assert page.locator(".calendarbox").first.is_visible()
    _shot(page, "change-form")
    page.goto(f"{base}/admin/asynch/asynchtask/")
    _settle(page)
    assert page.locator("#changelist-filter").count() == 1 and page.locator(".xfull, nav.toplinks").count() >= 1
    _shot(page, "task-list")

    # The API docs: Swagger UI from the sidecar, its start-up script served apart.
    page.goto(f"{base}/api/docs")
    page.wait_for_selector(".swagger-ui .info .title", timeout=20_000)
    _settle(page)
    assert "AI job platform" in page.locator(".swagger-ui .info .title").inner_text()
    assert page.locator(".opblock").count() > 10
    _shot(page, "api-docs")

    mistyped = page.goto(f"{base}/admin/ai_jobs/airuntimejobz/")
    _settle(page)
    assert mistyped is not None and mistyped.status == 404 and page.locator("h1").inner_text() == "Page not found"

    watched: Watched = page.watched  # type: ignore[attr-defined]
    assert watched.violations == []
    # The one message: chromium's note of the mistyped address's own 404.
    assert watched.console == [
        f"{base}/admin/ai_jobs/airuntimejobz/ error: Failed to load resource: the server responded with a status of 404 (Not Found)"
    ]
    for path in ["/admin/login/?next=/admin/", "/admin/", "/admin/ai_jobs/airuntimejob/",
                 f"/admin/ai_jobs/airuntimejob/{failed.id}/change/", "/admin/quotas/platformcircuitbreaker/",
                 "/admin/ai_jobs/airuntimejob/dashboard/", "/admin/learning/studyrecord/add/",
                 "/admin/asynch/asynchtask/", "/admin/ai_jobs/airuntimejobz/"]:  # fmt: skip
        assert policy_of(watched.documents[path]["content-security-policy"]) == POLICY, path
    assert policy_of(watched.documents["/api/docs"]["content-security-policy"]) == {**POLICY, "img-src": "'self' data:"}
