"""A quota that timezones cannot stretch: changing ``timezone`` to a zone whose local
date differs moves the user's quota with them. Each counter of the day they arrive in
becomes at least the day they leave's (per key mode), a job reserved on the day left
after the move is counted on the new day instead, and tokens that land on the day left
later count on the day arrived in too. However the change is made: the user API, the
service, Django admin's settings form."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from ai_jobs.models import AiRuntimeJob
from config.errors import DomainError, ErrorCode
from quotas import selectors as quota_selectors
from quotas import services as quotas
from quotas.models import UserAiSettings, UserAiUsage
from tests.support.api import RuntimeClient, error_code
from tests.support.factories import VALID_OUTPUTS, JobFactory
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

# 20:00 UTC on 30 November (in the future: model defaults still use the real clock):
# already 1 December in Shanghai and Kiritimati, still 30 November in UTC and Los Angeles.
EVENING = dt.datetime(2099, 11, 30, 20, 0, tzinfo=dt.UTC)
# 11:00 UTC: three dates at once, 29 November at UTC-12, 30 in UTC, 1 December at UTC+14.
MORNING = dt.datetime(2099, 11, 30, 11, 0, tzinfo=dt.UTC)
NOV_29, NOV_30, DEC_1 = dt.date(2099, 11, 29), dt.date(2099, 11, 30), dt.date(2099, 12, 1)


@pytest.fixture
def at(monkeypatch):
    def set_clock(instant: dt.datetime) -> None:
        monkeypatch.setattr(timezone, "now", lambda: instant)

    return set_clock


def _learner(*, jobs: int = 20, tokens: int = 100_000, zone: str = "UTC") -> Learner:
    learner = Learner()
    UserAiSettings.objects.filter(user=learner.user).update(
        max_daily_ai_jobs=jobs, max_daily_token_budget=tokens, timezone=zone
    )
    return learner


def _move(learner: Learner, zone: str) -> dict:
    response = learner.patch("/ai/settings", {"timezone": zone})
    assert response.status_code == 200, response.json()
    return response.json()


def _usage(learner: Learner, day: dt.date, mode: str = "platform_key") -> tuple[int, int]:
    row = UserAiUsage.objects.filter(user=learner.user, local_date=day, api_key_mode=mode).first()
    return (row.job_count, row.tokens_used) if row else (0, 0)


def _created(response) -> bool:
    assert response.status_code in (201, 400), response.json()
    return response.status_code == 201


def test_moving_east_to_tomorrow_carries_the_days_jobs_and_tokens_per_key_mode(at):
    at(EVENING)
    learner = _learner(jobs=3)
    credential = learner.credential()
    assert _created(learner.job()) and _created(learner.job())
    assert _created(learner.job(apiKeyMode="user_deepseek_key", credentialId=credential))
    UserAiUsage.objects.filter(user=learner.user, local_date=NOV_30, api_key_mode="platform_key").update(
        tokens_used=1_234, cost_cents=Decimal("5.5")
    )
    assert _move(learner, "Asia/Shanghai")["localDate"] == "2099-12-01"
    usage = learner.get("/ai/profile").json()["usage"]
    assert (usage["platform_key"]["jobCount"], usage["platform_key"]["tokensUsed"]) == (2, 1_234)
    assert usage["platform_key"]["costCents"] == 5.5
    assert (usage["user_deepseek_key"]["jobCount"], usage["user_deepseek_key"]["tokensUsed"]) == (1, 0)
    # One platform-key job is left on the new day, as it was on the old one.
    assert _created(learner.job())
    refused = learner.job()
    assert refused.status_code == 400 and error_code(refused) == "DAILY_JOB_LIMIT_EXCEEDED"
    assert _usage(learner, DEC_1) == (3, 1_234) and _usage(learner, NOV_30) == (2, 1_234)


def test_moving_west_to_a_day_with_usage_of_its_own_keeps_the_larger_of_each_counter(at):
    at(EVENING)
    learner = _learner(jobs=5, zone="Asia/Shanghai")
    # 30 November was counted apart (the learner lived it before their 1 December began).
    UserAiUsage.objects.create(user=learner.user, local_date=NOV_30, api_key_mode="platform_key", job_count=4,
                               tokens_used=100)  # fmt: skip
    UserAiUsage.objects.create(user=learner.user, local_date=DEC_1, api_key_mode="platform_key", job_count=2,
                               tokens_used=500)  # fmt: skip
    assert _move(learner, "America/Los_Angeles")["localDate"] == "2099-11-30"
    assert _usage(learner, NOV_30) == (4, 500)
    left = UserAiUsage.objects.get(user=learner.user, local_date=DEC_1, api_key_mode="platform_key")
    assert (left.moved_to, left.job_count, left.tokens_used) == (NOV_30, 2, 500)
    # What is left to spend is never more than it was before the move (5 - 2): here 5 - 4.
    assert _created(learner.job())
    assert error_code(learner.job()) == "DAILY_JOB_LIMIT_EXCEEDED"


def test_flipping_back_and_forth_neither_frees_a_job_nor_counts_one_twice(at):
    at(EVENING)
    learner = _learner(jobs=5)
    assert _created(learner.job()) and _created(learner.job())
    for zone in ("Pacific/Kiritimati", "UTC", "Pacific/Kiritimati", "UTC"):
        _move(learner, zone)
    assert _usage(learner, NOV_30) == (2, 0) and _usage(learner, DEC_1) == (2, 0)
    created = 0
    for zone in ("Pacific/Kiritimati", "UTC", "Pacific/Kiritimati", "UTC", "Pacific/Kiritimati", "UTC"):
        _move(learner, zone)
        created += _created(learner.job())
    assert created == 3  # the day's five, across both dates
    assert AiRuntimeJob.objects.filter(user=learner.user).count() == 5
    assert _usage(learner, NOV_30)[0] == 5 and _usage(learner, DEC_1)[0] == 5


def test_a_change_of_zone_that_keeps_the_local_date_moves_nothing(at):
    at(EVENING)
    learner = _learner()
    assert _created(learner.job())
    assert _move(learner, "Europe/London")["localDate"] == "2099-11-30"
    assert UserAiSettings.objects.get(user=learner.user).quota_epoch == 0
    assert list(UserAiUsage.objects.filter(user=learner.user).values_list("local_date", "job_count")) == [(NOV_30, 1)]


def test_a_job_counted_with_settings_read_before_a_move_lands_on_the_day_moved_to(at):
    """A request that read the user's settings (and so their day) before a move commits
    reserves after it: it is counted on the new day, against the new day's limit."""
    at(EVENING)
    learner = _learner(jobs=2)
    assert _created(learner.job())
    read_before = quota_selectors.quota_state_get(user_id=learner.user.pk)
    assert read_before.day == NOV_30
    _move(learner, "Pacific/Kiritimati")
    day = quotas.quota_reserve_job(ai_settings=read_before.ai_settings, api_key_mode="platform_key", day=NOV_30)
    assert day == DEC_1 and _usage(learner, DEC_1) == (2, 0) and _usage(learner, NOV_30) == (1, 0)
    with pytest.raises(DomainError) as refused:
        quotas.quota_reserve_job(ai_settings=read_before.ai_settings, api_key_mode="platform_key", day=NOV_30)
    assert refused.value.code == ErrorCode.DAILY_JOB_LIMIT_EXCEEDED
    assert _usage(learner, NOV_30) == (1, 0)


def test_a_result_landing_after_a_move_counts_on_the_day_moved_to(at):
    at(EVENING)
    learner = _learner(tokens=400)
    job_id = learner.job().json()["jobId"]
    _move(learner, "Asia/Shanghai")
    runtime = RuntimeClient("runtime-1")
    runtime.lock(job_id)
    usage = {"promptTokens": 300, "completionTokens": 200}
    assert runtime.result(job_id, 1, VALID_OUTPUTS["learning_state_analysis"], usage=usage).status_code == 200
    # The job's tokens count on the day it was counted on, and on the day the user is on now.
    assert AiRuntimeJob.objects.get(id=job_id).quota_date == NOV_30
    assert _usage(learner, NOV_30) == (1, 500) and _usage(learner, DEC_1) == (1, 500)
    assert learner.get("/ai/profile").json()["usage"]["platform_key"]["tokensUsed"] == 500
    refused = learner.job()
    assert refused.status_code == 400 and error_code(refused) == "DAILY_TOKEN_BUDGET_EXCEEDED"


def test_tokens_follow_every_move_since_their_jobs_day(at):
    at(MORNING)
    learner = _learner(zone="Etc/GMT+12")
    assert _created(learner.job())
    _move(learner, "UTC")
    _move(learner, "Pacific/Kiritimati")
    quotas.usage_record_calls(user_id=learner.user.pk, quota_date=NOV_29, api_key_mode="platform_key",
                              total_tokens=70, cost_cents=Decimal("0.25"))  # fmt: skip
    assert [_usage(learner, day) for day in (NOV_29, NOV_30, DEC_1)] == [(1, 70), (1, 70), (1, 70)]
    # A user's own key is counted the same way, apart from the platform key.
    quotas.usage_record_result(user_id=learner.user.pk, quota_date=NOV_29, api_key_mode="user_deepseek_key",
                               total_tokens=9, cost_cents=Decimal(0))  # fmt: skip
    assert _usage(learner, DEC_1, "user_deepseek_key") == (0, 9) and _usage(learner, DEC_1) == (1, 70)


def test_a_move_back_to_a_day_makes_it_the_users_own_again(at):
    at(EVENING)
    learner = _learner(jobs=4)
    assert _created(learner.job())
    _move(learner, "Asia/Shanghai")
    assert _created(learner.job())  # counted on 1 December
    _move(learner, "UTC")
    back = UserAiUsage.objects.get(user=learner.user, local_date=NOV_30, api_key_mode="platform_key")
    assert (back.moved_to, back.left_epoch, back.job_count) == (None, None, 2)
    assert _created(learner.job()) and _usage(learner, NOV_30) == (3, 0)


def test_the_service_refuses_a_timezone_that_is_not_iana():
    learner = _learner()
    with pytest.raises(DomainError) as refused:
        quotas.ai_settings_write(user=learner.user, timezone_name="Mars/Olympus")
    assert refused.value.code == ErrorCode.VALIDATION_ERROR and "timezone" in refused.value.fields
    assert UserAiSettings.objects.get(user=learner.user).timezone == "UTC"


def _operator() -> Client:
    """A superuser's admin session (logged in on the test's clock)."""
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("operator", "op@example.com", "pw"))
    return client


def _saved(page) -> bool:
    return page.status_code == 302 and page["Location"] == "/admin/quotas/useraisettings/"


def _admin_form(operator: Client, row: UserAiSettings, **changes) -> dict:
    """What a browser posts from the settings' change page, with ``changes`` made
    (``None``: an unticked box), its hidden initial values included."""
    form = operator.get(f"/admin/quotas/useraisettings/{row.pk}/change/").context["adminform"].form
    data: dict = {"_save": "Save"}
    for bound in form:
        value = changes.get(bound.name, bound.value())
        if value not in (None, False):
            data[bound.name] = "on" if value is True else value
        if bound.field.show_hidden_initial:
            data[f"initial-{bound.name}"] = bound.initial
    return data


def test_a_timezone_changed_in_admin_moves_the_quota_as_the_api_does(at):
    at(EVENING)
    operator = _operator()
    learner = _learner(jobs=2)
    assert _created(learner.job()) and _created(learner.job())
    row = UserAiSettings.objects.get(user=learner.user)
    page = operator.post(
        f"/admin/quotas/useraisettings/{row.pk}/change/", _admin_form(operator, row, timezone="Asia/Shanghai")
    )
    assert _saved(page)
    assert UserAiSettings.objects.get(user=learner.user).timezone == "Asia/Shanghai"
    assert _usage(learner, DEC_1) == (2, 0)
    assert error_code(learner.job()) == "DAILY_JOB_LIMIT_EXCEEDED"
    bad = operator.post(
        f"/admin/quotas/useraisettings/{row.pk}/change/", _admin_form(operator, row, timezone="Mars/Olympus")
    )
    assert bad.status_code == 200 and "Not an IANA time zone name" in bad.content.decode()
    assert UserAiSettings.objects.get(user=learner.user).timezone == "Asia/Shanghai"


def test_turning_ai_analysis_off_in_admin_cancels_the_users_pending_jobs():
    operator, learner = _operator(), _learner()
    job_id = learner.job().json()["jobId"]
    row = UserAiSettings.objects.get(user=learner.user)
    page = operator.post(
        f"/admin/quotas/useraisettings/{row.pk}/change/", _admin_form(operator, row, ai_analysis_enabled=None)
    )
    assert _saved(page)
    assert UserAiSettings.objects.get(user=learner.user).ai_analysis_enabled is False
    assert AiRuntimeJob.objects.get(id=job_id).status == "cancelled"


def test_adding_a_users_settings_in_admin_with_ai_off_cancels_the_jobs_the_default_let_in(settings):
    """A user without a settings row has the defaults; an operator's new row for them
    is a change of those, made as the API makes it."""
    settings.AI_ANALYSIS_ENABLED_BY_DEFAULT = True
    job = JobFactory(consented=False)
    assert not UserAiSettings.objects.filter(user=job.user).exists()
    operator = _operator()
    form = operator.get("/admin/quotas/useraisettings/add/").context["adminform"].form
    data = {name: bound.value() for name, bound in ((b.name, b) for b in form) if bound.value() not in (None, False)}
    data.update({"user": job.user.pk, "_save": "Save"})
    data.pop("ai_analysis_enabled", None)  # the box unticked
    page = operator.post("/admin/quotas/useraisettings/add/", data)
    assert _saved(page), page.content.decode()[:3000]
    assert UserAiSettings.objects.get(user=job.user).ai_analysis_enabled is False
    assert AiRuntimeJob.objects.get(id=job.id).status == "cancelled"


def test_a_users_settings_cannot_be_deleted_alone_in_admin():
    """Deleting the row would bring it back with the defaults: consent changed with no
    job cancelled. The settings go with their user only."""
    operator, learner = _operator(), _learner()
    job_id = learner.job().json()["jobId"]
    row = UserAiSettings.objects.get(user=learner.user)
    assert operator.post(f"/admin/quotas/useraisettings/{row.pk}/delete/", {"post": "yes"}).status_code == 403
    bulk = operator.post(
        "/admin/quotas/useraisettings/", {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"}
    )
    assert bulk.status_code == 403  # the action is not offered, and refused when posted
    assert UserAiSettings.objects.get(pk=row.pk).ai_analysis_enabled is True
    assert AiRuntimeJob.objects.get(id=job_id).status == "pending"
