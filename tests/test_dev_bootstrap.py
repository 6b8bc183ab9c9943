"""What ``make run`` sets up before its processes start (``dev_bootstrap``, ``ops.demo``):
the operator, the demo learner with AI analysis on and study records to analyse, the
demo tenant's known key and the demo model config; idempotent, and its summary is the
quick start rendered with its own values. And the pieces of a quiet, honest start: the
development-key warning said once, the stand-in saying that it takes any key."""

from __future__ import annotations

import io
import logging

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from asynch import selectors as asynch_selectors
from asynch import services as asynch
from asynch.models import Tenant
from config import keyring
from delivery.models import Device
from delivery.services import push
from learning.models import KnowledgeBase, KnowledgePoint, Material, StudyRecord
from ops import demo, quickstart
from quotas import selectors as quota_selectors
from quotas import services as quotas
from runtime_worker.standin import StandinServer
from tests.support.credentials import (  # noqa: F401  (fixtures)
    client_for,
    encryption_keys_fixture,
    make_credential,
    url,
)
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


@pytest.fixture(autouse=True)
def _development(settings):
    settings.DEBUG = True  # make run's setting: dev_bootstrap refuses to run without it


def _bootstrap(**options: object) -> str:
    out = io.StringIO()
    call_command("dev_bootstrap", stdout=out, **options)
    return out.getvalue()


def test_it_makes_the_operator_the_demo_learner_and_the_demo_tenant_once(settings):
    settings.AI_ANALYSIS_ENABLED_BY_DEFAULT = False  # consent is opt-in: the demo turns it on itself
    first = _bootstrap(standin_url="http://127.0.0.1:8399/", port=8123)
    second = _bootstrap(standin_url="http://127.0.0.1:8301", port=8123)
    User = get_user_model()
    assert User.objects.get(username="admin").is_superuser
    learner = User.objects.get(username="demo")
    assert learner.check_password("demo") and not learner.is_staff
    assert quota_selectors.ai_settings_get(user=learner).ai_analysis_enabled is True
    assert KnowledgeBase.objects.filter(user=learner).count() == 1  # the second run added nothing
    assert KnowledgePoint.objects.filter(user=learner).count() == len(demo.DEMO_KNOWLEDGE_POINTS)
    records = StudyRecord.objects.filter(user=learner)
    assert records.count() == 12 and records.filter(is_correct=False).count() == 5
    assert Material.objects.filter(user=learner).count() == 1

    tenant = Tenant.objects.get(name=demo.DEMO_TENANT)
    assert tenant.is_admin and tenant.api_keys.count() == 1
    listed = APIClient().get("/model/listModels", HTTP_X_API_KEY=quickstart.DEFAULT_TENANT_KEY)
    assert listed.status_code == 200 and [m["modelName"] for m in listed.json()["results"]] == ["demo-chat"]
    model = asynch_selectors.model_get(model_name=demo.DEMO_MODEL)
    assert (model.base_url, model.route) == ("http://127.0.0.1:8301", "/chat/completions")  # the stand-in's port now
    assert asynch.model_api_key(model) == "Authorization:Bearer sk-standin-demo"

    for summary in (first, second):
        assert "operator 'admin', password 'admin'" in summary
        assert "'demo', password 'demo': AI analysis on" in summary and "12 study records" in summary
        assert f"X-Api-Key {quickstart.DEFAULT_TENANT_KEY}" in summary
    assert quickstart.render("learner", api="http://127.0.0.1:8123") in second
    assert quickstart.render("model_asynch", api="http://127.0.0.1:8123") in second
    assert "{{" not in second


def test_the_demo_learners_phone_is_registered_once_and_its_pushes_go_to_the_stand_in(
    settings, caplog, django_capture_on_commit_callbacks
):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    first = _bootstrap(port=8123)
    _bootstrap(port=8123)
    learner = get_user_model().objects.get(username="demo")
    [phone] = Device.objects.filter(user=learner)
    assert (phone.platform, phone.locale, phone.enabled) == ("ios", "zh-Hans-CN", True)
    assert "no APNs settings: the worker logs where each push would go" in first
    with (
        caplog.at_level(logging.INFO, logger="delivery.senders.push"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        push.pushes_write(user_id=learner.pk, event_id="ntf_demo", payload={"jobId": "job_demo", "words": {}})
    assert any("push stand-in" in r.getMessage() and phone.id in r.getMessage() for r in caplog.records)


def test_names_passwords_and_key_come_from_the_options_and_no_stand_in_means_no_demo_model():
    summary = _bootstrap(demo_username="ada", demo_password="s3cret!", tenant_key="ak_mine_0123456789", port=8001)
    ada = get_user_model().objects.get(username="ada")
    assert ada.check_password("s3cret!")
    assert '"username": "ada", "password": "s3cret!"' in summary
    assert "API=http://127.0.0.1:8001" in summary
    assert asynch_selectors.model_get(model_name=demo.DEMO_MODEL) is None
    assert "no demo model config" in summary and "KEY=" not in summary
    response = APIClient().get("/model/listModels", HTTP_X_API_KEY="ak_mine_0123456789")
    assert response.status_code == 200 and response.json()["results"] == []


def test_the_development_key_warning_is_said_once_by_make_run_not_by_every_process(settings, caplog):
    settings.CREDENTIAL_ENCRYPTION_KEYS = []
    for warn, expected in ((True, 1), (False, 0)):
        settings.CREDENTIAL_DEV_KEY_WARNING = warn
        keyring._build_keyring.cache_clear()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="config.keyring"):
            assert keyring.keyring().development
        assert [r.getMessage() for r in caplog.records] == [keyring.DEVELOPMENT_KEY_WARNING] * expected
    keyring._build_keyring.cache_clear()
    assert "Keys:      CREDENTIAL_ENCRYPTION_KEYS is not set" in _bootstrap()


@pytest.mark.usefixtures("encryption_keys")
def test_a_key_tested_against_the_stand_in_is_said_to_prove_nothing(user, settings):
    server = StandinServer().start()
    try:
        settings.DEEPSEEK_BASE_URL = server.base_url
        credential = make_credential(user)
        body = client_for(user).post(url(credential.id, "test")).json()
    finally:
        server.stop()
    assert body["ok"] is True and body["httpStatus"] == 200
    assert "stand-in" in body["message"] and "accepts any key" in body["message"]


def test_the_breakers_503_is_logged_as_a_warning_and_a_500_still_as_an_error(caplog):
    quotas.breaker_transition(to="open", actor="operator", reason="test")
    learner = Learner()
    with caplog.at_level(logging.INFO, logger="django.request"):
        refused = learner.job()
    assert refused.status_code == 503
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "django.request"]
    assert lines == [("WARNING", "Service Unavailable: /ai/jobs")]


def test_a_cleaner_run_that_changed_nothing_is_no_line_at_info(caplog):
    with caplog.at_level(logging.INFO, logger="asynch.cleaner"):
        asynch.tasks_clean()
    assert [r for r in caplog.records if r.name == "asynch.cleaner"] == []
    with caplog.at_level(logging.DEBUG, logger="asynch.cleaner"):
        asynch.tasks_clean()
    assert [r.levelname for r in caplog.records if r.name == "asynch.cleaner"] == ["DEBUG"]
