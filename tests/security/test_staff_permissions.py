"""Staff power is a permission (contract section 10), tried against gunicorn by a staff
user who may only look at things in Django admin: ``PATCH /ai/settings`` with a limit
gets the learner's answer (``403``, the limit unchanged) and ``/model/stats`` is ``403``;
the same user given the admin's permission (``quotas.change_useraisettings``,
``asynch.view_asynchmodelstat``) gets staff's answer."""

from __future__ import annotations

import pytest
import requests
from django.contrib.auth.models import Permission

from asynch import services as asynch_services
from quotas.models import UserAiSettings
from tests.support.security.accounts import Client, error_of, module_server, pair, user_with_password

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

server = module_server()


def _staff(username: str, *codenames: str):  # type: ignore[no-untyped-def]
    user = user_with_password(username, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def _patch(url: str, access: str, body: dict) -> requests.Response:
    return requests.patch(f"{url}/ai/settings", json=body, headers={"Authorization": f"Bearer {access}"}, timeout=30)


def _stats(url: str, access: str) -> requests.Response:
    return requests.get(f"{url}/model/stats", headers={"Authorization": f"Bearer {access}"}, timeout=30)


def test_a_staff_flag_without_the_permission_changes_no_limit(server):
    viewer = _staff("viewer", "view_useraisettings", "view_asynchmodelstat")
    access = pair(Client(server), "viewer")["access"]
    before = _patch(server, access, {}).json()["maxDailyAiJobs"]

    # The attack: a staff JWT raising its own daily limit through the user API.
    for body in ({"maxDailyAiJobs": 100_000}, {"maxDailyTokenBudget": 10**9}, {"maxDailyAiJobs": 5, "timezone": "UTC"}):
        refused = _patch(server, access, body)
        assert refused.status_code == 403 and error_of(refused)["code"] == "FORBIDDEN", (body, refused.text)
    limits = UserAiSettings.objects.filter(user=viewer).values_list("max_daily_ai_jobs", "max_daily_token_budget")
    assert list(limits) == [(before, 100_000)]
    # What a learner may change, it may.
    assert _patch(server, access, {"timezone": "Asia/Shanghai"}).status_code == 200

    _staff("changer", "change_useraisettings")
    allowed = _patch(server, pair(Client(server), "changer")["access"], {"maxDailyAiJobs": 500})
    assert allowed.status_code == 200 and allowed.json()["maxDailyAiJobs"] == 500, allowed.text


def test_a_staff_flag_without_the_permission_reads_no_tenants_statistics(server):
    tenant = asynch_services.tenant_create(name="biz")
    asynch_services.stat_count_call(tenant_id=tenant.id, creator="someone", model_name="chat")
    _staff("looker", "view_useraisettings", "view_asynchmodel")  # may see much, not the statistics

    # The attack: a staff JWT reading every tenant's rows.
    refused = _stats(server, pair(Client(server), "looker")["access"])
    assert refused.status_code == 403 and error_of(refused)["code"] == "FORBIDDEN", refused.text
    assert "biz" not in refused.text and "someone" not in refused.text

    _staff("statsviewer", "view_asynchmodelstat")
    allowed = _stats(server, pair(Client(server), "statsviewer")["access"])
    assert allowed.status_code == 200, allowed.text
    assert [row["creator"] for row in allowed.json()["results"]] == ["someone"]
