"""The outbox in Django admin (contract 11.2): a user's devices, never their tokens;
each notice's deliveries with their outcome; deleting a device drops its unsent pushes."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from ai_jobs.models import Notification
from delivery.models import Delivery
from delivery.services import push
from tests.support.push import ANDROID_TOKEN, IOS_TOKEN, finish_job, register
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


@pytest.fixture
def operator() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("operator", "op@example.com", "pw"))
    return client


def test_a_users_devices_are_listed_by_their_token_suffix_only(operator: Client):
    learner = Learner(username="learner-with-phones")
    ios = register(learner, "ios", IOS_TOKEN, locale="zh-CN").json()
    register(learner, "android", ANDROID_TOKEN)
    page = operator.get("/admin/delivery/device/", {"q": "learner-with-phones"})
    assert page.status_code == 200
    text = page.content.decode()
    assert ios["id"] in text and IOS_TOKEN[-6:] in text and "zh-CN" in text
    assert IOS_TOKEN not in text and ANDROID_TOKEN not in text
    detail = operator.get(f"/admin/delivery/device/{ios['id']}/change/")
    assert detail.status_code == 200 and IOS_TOKEN not in detail.content.decode()


def test_a_notices_deliveries_show_with_their_outcome(
    operator: Client, runtime, django_capture_on_commit_callbacks, settings
):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # no push settings: the stand-in logs and drops
    learner = Learner()
    register(learner, "android", ANDROID_TOKEN)
    job_id = finish_job(learner, runtime, django_capture_on_commit_callbacks)
    notice = Notification.objects.get(job_id=job_id)
    [delivery] = Delivery.objects.filter(event_id=notice.id)
    page = operator.get(f"/admin/ai_jobs/notification/{notice.id}/change/")
    assert page.status_code == 200 and f"android {delivery.receiver_id}: dropped" in page.content.decode()
    listed = operator.get("/admin/delivery/delivery/", {"event_id__exact": notice.id})
    assert listed.status_code == 200 and delivery.id in listed.content.decode()
    detail = operator.get(f"/admin/delivery/delivery/{delivery.id}/change/")
    assert detail.status_code == 200 and "not sent" in detail.content.decode()


def test_deleting_a_device_in_admin_drops_its_unsent_pushes(operator: Client):
    learner = Learner()
    device_id = register(learner, "ios", IOS_TOKEN).json()["id"]
    [pending] = push.pushes_write(user_id=learner.user.pk, event_id="ntf_admin", payload={"jobId": "job_x"})
    response = operator.post(f"/admin/delivery/device/{device_id}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert Delivery.objects.get(id=pending).status == "dropped"
    assert learner.get("/ai/devices").json()["results"] == []
