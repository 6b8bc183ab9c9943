"""A staff account with too little power, driving the admin from outside: every admin
action and every custom admin view that changes something needs the Django permission
that matches what it changes. A staff user who may only view (every ``view_*``
permission, no other) is shown no such action, no Rerun button and no breaker form, and
gets ``403`` when they post one anyway, with a valid CSRF token from their own session:
nothing changes, and no user's key is sent anywhere. A user holding the permission
runs the same posts. The dashboard needs the permission to view jobs.

Against gunicorn, through real HTTP posts (``tests/support/security/admin.py``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from axes.models import AccessAttempt
from django.contrib import admin
from django.utils import timezone

from ai_jobs.models import AiRuntimeJob
from asynch import services as asynch_services
from asynch.models import AsynchTask, Tenant, TenantApiKey
from config.admin_actions import AdminSite
from credentials.models import Credential
from credentials.services import credential_create
from learning.models import KnowledgeBase
from quotas.models import PlatformCircuitBreaker
from tests.support.factories import JobFactory, UserFactory
from tests.support.learning_factories import KnowledgeBaseFactory
from tests.support.ops import Gunicorn
from tests.support.security.admin import Recorder, admin_gunicorn, logged_in, staff, view_only

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

USER_KEY = "sk-users-own-key-0000000000000000abcd"
JOBS = "/admin/ai_jobs/airuntimejob/"
BREAKER = "/admin/quotas/platformcircuitbreaker/"
DASHBOARD = "/admin/ai_jobs/airuntimejob/dashboard/"


@pytest.fixture(scope="module")
def provider() -> Iterator[Recorder]:
    recorder = Recorder()
    yield recorder
    recorder.stop()


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory, provider: Recorder) -> Iterator[Gunicorn]:  # type: ignore[no-untyped-def]
    log = tmp_path_factory.mktemp("admin-permissions") / "gunicorn.log"
    with admin_gunicorn(log, env={"DEEPSEEK_BASE_URL": provider.url}) as running:
        yield running


@pytest.fixture(autouse=True)
def _fresh_provider(provider: Recorder) -> None:
    provider.seen.clear()


@dataclass
class World:
    """One row for each action to act on."""

    failed: AiRuntimeJob
    pending: AiRuntimeJob
    tenant: Tenant
    key: TenantApiKey
    task: AsynchTask
    credential: Credential
    attempt: AccessAttempt  # a failed admin login still counting towards a lock
    knowledge_base: KnowledgeBase
    expired_attempt: AccessAttempt | None = None


def login_attempt(address: str = "203.0.113.9") -> AccessAttempt:
    return AccessAttempt.objects.create(
        username="root", ip_address=address, user_agent="", get_data="", post_data="", http_accept="",
        path_info="/admin/login/", failures_since_start=1,
    )  # fmt: skip


def expired_login_attempt(w: World) -> list[str]:
    """A failed admin login past its cool-off (``attempt_time`` is set on insert), made
    after the staff user logged in: a login sweeps the expired ones itself."""
    attempt = login_attempt("203.0.113.10")
    AccessAttempt.objects.filter(id=attempt.id).update(attempt_time=timezone.now() - dt.timedelta(days=1))
    w.expired_attempt = attempt
    return [str(attempt.id)]


def _attempts_left(w: World) -> set[int]:
    return set(AccessAttempt.objects.values_list("id", flat=True))


def world() -> World:
    now = timezone.now()
    tenant = asynch_services.tenant_create(name="acme")
    return World(
        failed=JobFactory(status="failed", error_code="MODEL_TIMEOUT", attempt_no=1, finished_at=now),
        pending=JobFactory(),
        tenant=tenant,
        key=asynch_services.tenant_key_create(tenant=tenant).api_key,
        task=AsynchTask.objects.create(
            tenant=tenant, model_name="model-service", state=3, finished_at=now - dt.timedelta(minutes=1)
        ),
        credential=credential_create(user=UserFactory(), name="My key", api_key=USER_KEY),
        attempt=login_attempt(),
        knowledge_base=KnowledgeBaseFactory(),
    )  # fmt: skip


@dataclass(frozen=True)
class Action:
    changelist: str
    name: str
    permission: str | tuple[str, ...]  # what it needs beside viewing the list
    rows: Callable[[World], list[str]]
    done: Callable[[World], bool]  # whether it ran
    confirm: bool = False  # Django's delete asks first; "post=yes" is the answer

    def __str__(self) -> str:
        return self.name


def _credential(w: World) -> Credential:
    return Credential.objects.get(id=w.credential.id)


ACTIONS = [
    Action(JOBS, "rerun_failed", "ai_jobs.add_airuntimejob", lambda w: [w.failed.id],
           lambda w: AiRuntimeJob.objects.filter(retried_from_job=w.failed).exists()),
    Action(JOBS, "cancel_jobs", "ai_jobs.change_airuntimejob", lambda w: [w.pending.id],
           lambda w: AiRuntimeJob.objects.get(id=w.pending.id).status == "cancelled"),
    Action("/admin/asynch/tenant/", "issue_key", "asynch.add_tenantapikey", lambda w: [w.tenant.id],
           lambda w: TenantApiKey.objects.filter(tenant=w.tenant).count() == 2),
    Action("/admin/asynch/tenantapikey/", "revoke", "asynch.change_tenantapikey", lambda w: [w.key.id],
           lambda w: TenantApiKey.objects.get(id=w.key.id).revoked),
    Action("/admin/asynch/asynchtask/", "retry_now", "asynch.change_asynchtask", lambda w: [w.task.id],
           lambda w: AsynchTask.objects.get(id=w.task.id).state == 0),
    Action("/admin/credentials/credential/", "test_credentials", "credentials.change_credential",
           lambda w: [w.credential.id], lambda w: _credential(w).last_tested_at is not None),
    Action("/admin/credentials/credential/", "soft_delete_credentials", "credentials.delete_credential",
           lambda w: [w.credential.id], lambda w: _credential(w).deleted_at is not None),
    # django-axes': cleaning up expired login attempts deletes them.
    Action("/admin/axes/accessattempt/", "cleanup_expired_attempts", "axes.delete_accessattempt",
           expired_login_attempt, lambda w: _attempts_left(w) == {w.attempt.id}),
    # Django's own: deleting a tenant deletes its keys and tasks, so it needs all three.
    Action("/admin/asynch/tenant/", "delete_selected",
           ("asynch.delete_tenant", "asynch.delete_tenantapikey", "asynch.delete_asynchtask"),
           lambda w: [w.tenant.id], lambda w: not Tenant.objects.filter(id=w.tenant.id).exists(), confirm=True),
    # ... on a page with no action of its own, as on every page.
    Action("/admin/learning/knowledgebase/", "delete_selected", "learning.delete_knowledgebase",
           lambda w: [w.knowledge_base.id],
           lambda w: not KnowledgeBase.objects.filter(id=w.knowledge_base.id).exists(), confirm=True),
]  # fmt: skip


def test_every_admin_action_of_every_page_names_the_permission_it_needs():
    """The pages of every app, the project's and the libraries' alike: an action without
    ``permissions=`` would be offered to every staff user who may view the list."""
    unguarded = []
    for model, model_admin in admin.site._registry.items():
        names = [*(model_admin.actions or []), *dict(admin.site.actions)]
        actions = [found for name in names if (found := model_admin.get_action(name))]
        unguarded += [
            f"{model._meta.label}: {name}" for func, name, _ in actions if not getattr(func, "allowed_permissions", ())
        ]
    assert unguarded == []
    assert isinstance(admin.site, AdminSite)  # which answers 403 to such a post on every page


@pytest.mark.parametrize("action", ACTIONS, ids=str)
def test_a_view_only_staff_user_is_shown_no_action_and_is_refused_when_posting_it(
    server: Gunicorn, provider: Recorder, action: Action
):
    w = world()
    viewer = logged_in(server, view_only().username)
    page = viewer.get(action.changelist)
    assert page.status_code == 200  # they may read the list
    assert f'value="{action.name}"' not in page.text
    extra = {"post": "yes"} if action.confirm else {}
    refused = viewer.action(action.changelist, action.name, action.rows(w), **extra)
    assert refused.status_code == 403, refused.text[:500]
    assert not action.done(w)
    assert provider.seen == []  # no user's key went to the provider


@pytest.mark.parametrize("action", ACTIONS, ids=str)
def test_a_staff_user_holding_the_permission_is_shown_the_action_and_runs_it(
    server: Gunicorn, provider: Recorder, action: Action
):
    w = world()
    needs = action.permission if isinstance(action.permission, tuple) else (action.permission,)
    operator = logged_in(server, view_only("operator", *needs).username)
    page = operator.get(action.changelist)
    assert f'value="{action.name}"' in page.text
    extra = {"post": "yes"} if action.confirm else {}
    ran = operator.action(action.changelist, action.name, action.rows(w), **extra)
    assert ran.status_code == 302 and ran.headers["Location"].startswith(action.changelist), ran.text[:500]
    assert action.done(w)
    if action.name == "test_credentials":
        assert provider.seen == [("GET", "/models", f"Bearer {USER_KEY}")]


def test_the_rerun_button_is_shown_and_obeyed_only_for_those_who_may_make_jobs(server: Gunicorn):
    w = world()
    page, rerun = f"{JOBS}{w.failed.id}/change/", f"{JOBS}{w.failed.id}/rerun/"
    # Viewing the job, or cancelling jobs, is not making one.
    for user in (view_only("viewer"), view_only("canceller", "ai_jobs.change_airuntimejob")):
        session = logged_in(server, user.username)
        shown = session.get(page)
        assert shown.status_code == 200 and w.failed.id in shown.text
        assert "rerun-button" not in shown.text
        assert session.post(rerun, {}).status_code == 403
    assert not AiRuntimeJob.objects.filter(retried_from_job=w.failed).exists()

    rerunner = logged_in(server, view_only("rerunner", "ai_jobs.add_airuntimejob").username)
    assert "rerun-button" in rerunner.get(page).text
    made = rerunner.post(rerun, {})
    new = AiRuntimeJob.objects.get(retried_from_job=w.failed)
    assert made.status_code == 302 and made.headers["Location"] == f"{JOBS}{new.id}/change/"


def _breaker_state() -> str:
    return PlatformCircuitBreaker.objects.values_list("state", flat=True).first() or "closed"


def test_the_breaker_control_is_shown_and_obeyed_only_for_those_who_may_change_the_breaker(server: Gunicorn):
    nobody = logged_in(server, staff("nobody").username)
    assert nobody.get(BREAKER).status_code == 403  # staff, but no permission on the breaker at all

    viewer = logged_in(server, view_only().username)
    panel = viewer.get(BREAKER)
    assert panel.status_code == 200 and "breaker-state" in panel.text  # they may read it
    assert 'name="to_state"' not in panel.text and 'class="breaker-form"' not in panel.text
    refused = viewer.post(BREAKER, {"to_state": "open", "reason": "a viewer's try"})
    assert refused.status_code == 403
    assert _breaker_state() == "closed"

    operator = logged_in(server, view_only("operator", "quotas.change_platformcircuitbreaker").username)
    assert 'name="to_state"' in operator.get(BREAKER).text
    moved = operator.post(BREAKER, {"to_state": "open", "reason": "provider incident"})
    assert moved.status_code == 302 and _breaker_state() == "open"


def test_the_dashboard_needs_the_permission_to_view_jobs(server: Gunicorn):
    nobody = logged_in(server, staff("nobody").username)
    assert nobody.get(DASHBOARD).status_code == 403
    assert nobody.get(DASHBOARD + "?partial=1").status_code == 403
    viewer = logged_in(server, staff("viewer", "ai_jobs.view_airuntimejob").username)
    assert viewer.get(DASHBOARD).status_code == 200
    assert viewer.get(DASHBOARD + "?partial=1").status_code == 200
