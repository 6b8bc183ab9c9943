"""Pushes (contract 11.2) on the wire protocols themselves, against local stand-ins
that check every request as Apple and Google would (tests/support/push_standins.py):
a learner with an iOS and an Android device finishes a job and each device gets one
push with the job's id, the right badge and words in its locale; dead tokens disable
their device; a 503 is retried and delivered once; a task run twice pushes once; a
learner whose AI analysis is off gets nothing; a refused provider token is renewed
once; with no settings nothing is sent and nothing fails."""

from __future__ import annotations

import datetime as dt
import logging
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ai_jobs import job_types
from ai_jobs.notifications import push_words
from delivery.models import Delivery, Device
from delivery.senders import apns, fcm
from delivery.services import outbox
from delivery.services.push import language_of
from quotas.models import UserAiSettings
from tests.support.factories import VALID_OUTPUTS
from tests.support.push import (
    ANDROID_TOKEN,
    ANDROID_TOKEN_2,
    IOS_TOKEN,
    IOS_TOKEN_2,
    finish_job,
    notice_of,
    push_settings_fixture,  # noqa: F401  (fixtures)
    register,
    standins_fixture,  # noqa: F401  (fixtures)
)
from tests.support.push_standins import PushStandins, fcm_unavailable, fcm_unregistered, make_certificates
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


@pytest.fixture
def learner() -> Learner:
    return Learner()


def test_each_device_of_a_learner_who_finishes_a_job_gets_one_push_with_its_id_badge_and_words(
    learner: Learner, runtime, push_settings: PushStandins, django_capture_on_commit_callbacks, caplog
):
    earlier = finish_job(learner, runtime, django_capture_on_commit_callbacks)  # unread, before any device
    assert register(learner, "ios", IOS_TOKEN, locale="zh-Hans-CN", appVersion="2.1.0").status_code == 201
    assert register(learner, "android", ANDROID_TOKEN, locale="en-US").status_code == 201
    assert push_settings.apns.received == [] and push_settings.google.received == []

    with caplog.at_level(logging.INFO):
        job_id = finish_job(learner, runtime, django_capture_on_commit_callbacks)
    assert caplog.records and not [
        r for r in caplog.records if IOS_TOKEN in r.getMessage() or ANDROID_TOKEN in r.getMessage()
    ]

    notice = notice_of(job_id)
    assert push_settings.apns.problems == [] and push_settings.google.problems == []
    [ios] = push_settings.apns.to(IOS_TOKEN)
    assert len(push_settings.apns.received) == 1
    assert ios.status == 200 and ios.headers["apns-collapse-id"] == job_id
    assert ios.body == {
        "aps": {
            "alert": {"title": "学习状态分析已完成", "body": "打开应用查看结果。"},
            "badge": 2,  # this notice and the earlier one, both unread
            "sound": "default",
            "thread-id": "learning_state_analysis",
        },
        "jobId": job_id,
        "notificationId": notice.id,
        "jobType": "learning_state_analysis",
        "status": "succeeded",
    }
    [android] = push_settings.google.to(ANDROID_TOKEN)
    assert len(push_settings.google.received) == 1
    assert android.status == 200
    assert android.body["message"]["notification"] == {
        "title": "Learning analysis ready",
        "body": "Open the app to see what it made.",
    }
    assert android.body["message"]["data"] == {
        "jobId": job_id, "notificationId": notice.id, "jobType": "learning_state_analysis", "status": "succeeded"
    }  # fmt: skip
    assert android.body["message"]["android"] == {"collapse_key": job_id, "priority": "high", "ttl": "86400s"}
    assert set(Delivery.objects.filter(event_id=notice.id).values_list("status", flat=True)) == {"delivered"}
    assert not Delivery.objects.filter(event_id=notice_of(earlier).id).exists()
    listed = learner.get("/ai/devices").json()["results"]
    assert all(device["lastPushAt"] for device in listed)


def test_a_result_writes_the_pushes_of_all_the_learners_devices_in_one_statement_and_sends_none_before_commit(
    learner: Learner, runtime, push_settings: PushStandins
):
    if connection.vendor != "postgresql":
        pytest.skip("counts PostgreSQL's statements")
    for n in range(3):
        register(learner, "android", f"{ANDROID_TOKEN}-{n}")
    register(learner, "ios", IOS_TOKEN)
    job_id = learner.job().json()["jobId"]
    attempt = runtime.lock(job_id).json()["attemptNo"]
    with CaptureQueriesContext(connection) as captured:
        assert runtime.result(job_id, attempt, VALID_OUTPUTS["learning_state_analysis"]).status_code == 200
    writes = [q["sql"] for q in captured.captured_queries if "INTO delivery" in q["sql"]]
    assert len(writes) == 1 and writes[0].lstrip().startswith("INSERT INTO delivery "), writes
    assert Delivery.objects.filter(status="pending").count() == 4
    assert (
        push_settings.apns.received == [] and push_settings.google.received == []
    )  # the test's transaction never commits


def test_the_failure_of_a_job_is_pushed_too(learner: Learner, runtime, push_settings: PushStandins):
    register(learner, "android", ANDROID_TOKEN, locale="zh-TW")
    job_id = learner.job().json()["jobId"]
    attempt = runtime.lock(job_id).json()["attemptNo"]
    assert runtime.fail(job_id, attempt, "INVALID_SCHEMA").json()["status"] == "failed"
    from_outbox = Delivery.objects.get(event_id=notice_of(job_id).id)
    outbox.delivery_send(delivery_id=from_outbox.id)
    [android] = push_settings.google.to(ANDROID_TOKEN)
    assert android.body["message"]["notification"]["title"] == "学习状态分析未能完成"
    assert android.body["message"]["data"]["status"] == "failed"


@pytest.mark.parametrize(
    ("platform", "token", "answer"),
    [
        ("ios", IOS_TOKEN, (410, {}, {"reason": "Unregistered", "timestamp": 1700000000000})),
        ("ios", IOS_TOKEN, (400, {}, {"reason": "BadDeviceToken"})),
        ("ios", IOS_TOKEN, (400, {}, {"reason": "DeviceTokenNotForTopic"})),
        ("android", ANDROID_TOKEN, fcm_unregistered()),
        ("android", ANDROID_TOKEN, (400, {}, {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                                        "message": "The registration token is not a valid FCM registration token"}})),
    ],
)  # fmt: skip
def test_a_dead_token_disables_its_device_until_it_is_registered_again(
    learner: Learner, runtime, push_settings: PushStandins, django_capture_on_commit_callbacks, platform, token, answer
):
    device_id = register(learner, platform, token).json()["id"]
    other = "ios" if platform == "android" else "android"
    register(learner, other, IOS_TOKEN_2 if other == "ios" else ANDROID_TOKEN_2)
    standin = push_settings.apns if platform == "ios" else push_settings.google
    standin.answers[token].append(answer)

    finish_job(learner, runtime, django_capture_on_commit_callbacks)

    device = Device.objects.get(id=device_id)
    assert device.enabled is False
    [delivery] = Delivery.objects.filter(receiver_id=device_id)
    assert (delivery.status, delivery.last_status_code) == ("failed", answer[0])
    listed = {d["id"]: d for d in learner.get("/ai/devices").json()["results"]}
    assert listed[device_id]["enabled"] is False
    # The other device was not held back.
    assert Delivery.objects.exclude(receiver_id=device_id).get().status == "delivered"

    finish_job(learner, runtime, django_capture_on_commit_callbacks)
    assert len(standin.to(token)) == 1  # nothing more to a disabled device
    assert register(learner, platform, token).status_code == 200
    assert Device.objects.get(id=device_id).enabled is True
    finish_job(learner, runtime, django_capture_on_commit_callbacks)
    assert [r.status for r in standin.to(token)] == [answer[0], 200]
    assert push_settings.apns.problems == [] and push_settings.google.problems == []


def test_a_503_then_a_200_delivers_once_after_the_backoff(
    learner: Learner, runtime, push_settings: PushStandins, django_capture_on_commit_callbacks
):
    register(learner, "ios", IOS_TOKEN)
    register(learner, "android", ANDROID_TOKEN)
    push_settings.apns.answers[IOS_TOKEN].append((503, {"retry-after": "7"}, {"reason": "ServiceUnavailable"}))
    push_settings.google.answers[ANDROID_TOKEN].append(fcm_unavailable("7"))
    before = timezone.now()

    finish_job(learner, runtime, django_capture_on_commit_callbacks)

    deliveries = list(Delivery.objects.all())
    assert len(deliveries) == 2
    for delivery in deliveries:
        assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, 503)
        assert delivery.next_attempt_at >= before + dt.timedelta(seconds=7)  # Retry-After honoured
    assert outbox.deliveries_dispatch()["enqueued"] == 0  # not before its time
    Delivery.objects.update(next_attempt_at=timezone.now())  # their time came
    assert outbox.deliveries_dispatch()["enqueued"] == 2
    assert set(Delivery.objects.values_list("status", "attempts")) == {("delivered", 2)}
    assert [r.status for r in push_settings.apns.to(IOS_TOKEN)] == [503, 200]
    assert [r.status for r in push_settings.google.to(ANDROID_TOKEN)] == [503, 200]
    outbox.deliveries_dispatch(now=timezone.now() + dt.timedelta(hours=1))
    assert len(push_settings.apns.received) == len(push_settings.google.received) == 2  # delivered once


def test_a_celery_task_run_twice_pushes_once(
    learner: Learner, runtime, push_settings: PushStandins, django_capture_on_commit_callbacks
):
    register(learner, "ios", IOS_TOKEN)
    job_id = learner.job().json()["jobId"]
    attempt = runtime.lock(job_id).json()["attemptNo"]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:  # the message, not yet run
        runtime.result(job_id, attempt, VALID_OUTPUTS["learning_state_analysis"])
    [delivery] = Delivery.objects.all()
    assert push_settings.apns.received == []  # not before commit
    outbox.send.apply(args=[delivery.id])
    outbox.send.apply(args=[delivery.id])  # the broker delivered the message twice
    for callback in callbacks:  # and the after-commit callback enqueues (and runs) it once more
        callback()
    assert len(push_settings.apns.to(IOS_TOKEN)) == 1
    assert Delivery.objects.get().attempts == 1


def test_a_learner_whose_ai_analysis_is_off_gets_no_push(
    learner: Learner, runtime, push_settings: PushStandins, django_capture_on_commit_callbacks
):
    register(learner, "ios", IOS_TOKEN)
    register(learner, "android", ANDROID_TOKEN)
    job_id = learner.job().json()["jobId"]
    attempt = runtime.lock(job_id).json()["attemptNo"]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        runtime.result(job_id, attempt, VALID_OUTPUTS["learning_state_analysis"])
    assert Delivery.objects.filter(status="pending").count() == 2
    # Turned off before the pushes went: the unsent ones are dropped.
    assert learner.patch("/ai/settings", {"aiAnalysisEnabled": False}).status_code == 200
    for callback in callbacks:
        callback()
    assert set(Delivery.objects.values_list("status", flat=True)) == {"dropped"}
    assert push_settings.apns.received == [] and push_settings.google.received == []

    # Consent withdrawn by any other way, after the pushes were written: read as each is sent.
    learner.patch("/ai/settings", {"aiAnalysisEnabled": True})
    second = learner.job().json()["jobId"]
    attempt = runtime.lock(second).json()["attemptNo"]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        runtime.result(second, attempt, VALID_OUTPUTS["learning_state_analysis"])
    UserAiSettings.objects.filter(user=learner.user).update(ai_analysis_enabled=False)
    for callback in callbacks:
        callback()
    assert set(Delivery.objects.filter(event_id=notice_of(second).id).values_list("status", flat=True)) == {"dropped"}
    assert push_settings.apns.received == [] and push_settings.google.received == []


def test_a_refused_provider_token_is_renewed_and_the_push_tried_once_more(
    learner: Learner, runtime, push_settings: PushStandins, django_capture_on_commit_callbacks
):
    register(learner, "ios", IOS_TOKEN)
    register(learner, "android", ANDROID_TOKEN)
    finish_job(learner, runtime, django_capture_on_commit_callbacks)
    tokens_before = push_settings.google.token_requests
    # Both providers now refuse the tokens in use.
    push_settings.apns.refuse_provider_tokens.update(push_settings.apns.provider_tokens)
    push_settings.google.revoked.update(push_settings.google.issued)

    finish_job(learner, runtime, django_capture_on_commit_callbacks)

    assert [r.status for r in push_settings.apns.to(IOS_TOKEN)] == [200, 403, 200]
    assert [r.status for r in push_settings.google.to(ANDROID_TOKEN)] == [200, 401, 200]
    assert push_settings.google.token_requests == tokens_before + 1
    assert len(push_settings.apns.provider_tokens) == 2
    assert set(Delivery.objects.values_list("status", flat=True)) == {"delivered"}
    assert push_settings.apns.problems == [] and push_settings.google.problems == []


def test_the_apns_provider_token_is_reused_within_its_lifetime(
    learner: Learner, runtime, push_settings: PushStandins, django_capture_on_commit_callbacks
):
    register(learner, "ios", IOS_TOKEN)
    apns.PROVIDER_TOKEN._token = ""  # a fresh process
    for _ in range(3):
        finish_job(learner, runtime, django_capture_on_commit_callbacks)
    assert len(push_settings.apns.provider_tokens) == 1
    apns.PROVIDER_TOKEN._issued -= apns.TOKEN_REUSE_SECONDS  # its time is up
    finish_job(learner, runtime, django_capture_on_commit_callbacks)
    assert len(push_settings.apns.provider_tokens) == 2
    assert 20 * 60 <= apns.TOKEN_REUSE_SECONDS <= 50 * 60


def test_the_fcm_access_token_is_reused_until_it_is_about_to_expire(
    learner: Learner, runtime, push_settings: PushStandins, django_capture_on_commit_callbacks
):
    register(learner, "android", ANDROID_TOKEN)
    finish_job(learner, runtime, django_capture_on_commit_callbacks)
    asked = push_settings.google.token_requests
    for _ in range(2):
        finish_job(learner, runtime, django_capture_on_commit_callbacks)
    assert push_settings.google.token_requests == asked  # one token for every push
    fcm.ACCOUNT._load().expiry = datetime.now(UTC).replace(tzinfo=None)  # google-auth's naive UTC: it expires now
    finish_job(learner, runtime, django_capture_on_commit_callbacks)
    assert push_settings.google.token_requests == asked + 1
    assert [r.status for r in push_settings.google.received] == [200] * 4


def test_push_ca_file_is_what_is_trusted_not_a_bundle_the_environment_names(
    learner: Learner, runtime, push_settings: PushStandins, settings, monkeypatch, tmp_path,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    register(learner, "ios", IOS_TOKEN)
    register(learner, "android", ANDROID_TOKEN)
    fcm.ACCOUNT._load().expiry = datetime.now(UTC).replace(tzinfo=None)  # a token must be fetched: TLS to Google too
    monkeypatch.setenv("SSL_CERT_FILE", str(push_settings.certificates.ca_file))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(push_settings.certificates.ca_file))
    settings.PUSH_CA_FILE = str(make_certificates(tmp_path / "other").ca_file)  # a CA that signed nothing here

    finish_job(learner, runtime, django_capture_on_commit_callbacks)

    assert push_settings.apns.received == [] and push_settings.google.received == []
    rows = list(Delivery.objects.all())
    assert {(d.status, d.attempts) for d in rows} == {("pending", 1)}  # a network error: tried again later
    assert {d.last_error.split(":")[0] for d in rows} == {"APNs not reached", "FCM's access token not obtained"}
    settings.PUSH_CA_FILE = str(push_settings.certificates.ca_file)
    Delivery.objects.update(next_attempt_at=timezone.now())
    outbox.deliveries_dispatch()
    assert set(Delivery.objects.values_list("status", flat=True)) == {"delivered"}


def test_with_no_settings_nothing_is_sent_and_nothing_fails(
    learner: Learner, runtime, push_settings: PushStandins, settings, caplog, django_capture_on_commit_callbacks
):
    settings.APNS_KEY_FILE = settings.APNS_KEY_ID = settings.APNS_TEAM_ID = settings.APNS_TOPIC = ""
    settings.FCM_SERVICE_ACCOUNT_FILE = ""
    ios_id = register(learner, "ios", IOS_TOKEN).json()["id"]
    register(learner, "android", ANDROID_TOKEN)
    with caplog.at_level(logging.INFO, logger="delivery.senders.push"):
        job_id = finish_job(learner, runtime, django_capture_on_commit_callbacks)
    assert push_settings.apns.received == [] and push_settings.google.received == []
    assert set(Delivery.objects.values_list("status", flat=True)) == {"dropped"}
    assert Device.objects.filter(enabled=True).count() == 2
    lines = [r.getMessage() for r in caplog.records if "push stand-in" in r.getMessage()]
    assert len(lines) == 2 and any(ios_id in line and job_id in line and "APNS_KEY_FILE" in line for line in lines)
    assert all(IOS_TOKEN not in line and ANDROID_TOKEN not in line for line in lines)  # a token is never logged


@pytest.mark.parametrize(
    ("locale", "language"),
    [("zh", "zh-hans"), ("zh-CN", "zh-hans"), ("zh-Hans", "zh-hans"), ("zh-Hans-CN", "zh-hans"), ("zh-TW", "zh-hans"),
     ("ZH-hk", "zh-hans"), ("en", "en"), ("en-GB", "en"), ("fr-FR", "en"), ("ja", "en")],
)  # fmt: skip
def test_every_zh_locale_reads_simplified_chinese_and_every_other_english(locale, language, standins):
    assert language_of(locale) == language


def test_the_words_of_every_job_type_come_from_the_catalogues(standins):
    for job_type in job_types.names():
        for succeeded in (True, False):
            words = push_words(job_type=job_type, succeeded=succeeded)
            assert words["en"]["title"].startswith(job_types.get(job_type).label)
            chinese = words["zh-hans"]
            assert chinese["title"] != words["en"]["title"] and chinese["body"] != words["en"]["body"]
            assert all(any("\u4e00" <= c <= "\u9fff" for c in text) for text in chinese.values()), chinese
