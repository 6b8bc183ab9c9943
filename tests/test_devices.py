"""Devices (contract 11.1): POST/GET /ai/devices and DELETE /ai/devices/{id}. A token
is validated per platform and never returned; the same token again is the same device,
moved to whoever registered it last; a user holds at most PUSH_MAX_DEVICES_PER_USER;
a device deleted is sent nothing more."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from delivery.models import Delivery, Device
from delivery.services import push
from tests.support.api import error_code
from tests.support.concurrency import run_together
from tests.support.push import ANDROID_TOKEN, IOS_TOKEN, register
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def test_a_new_token_is_201_and_the_device_never_shows_its_token():
    learner = Learner()
    response = register(learner, "ios", IOS_TOKEN, appVersion="3.0.1")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"id", "platform", "tokenSuffix", "locale", "appVersion", "enabled", "createdAt", "lastPushAt"}
    assert body["id"].startswith("dev_") and body["platform"] == "ios" and body["tokenSuffix"] == IOS_TOKEN[-6:]
    assert (body["locale"], body["appVersion"], body["enabled"], body["lastPushAt"]) == ("en", "3.0.1", True, None)
    listed = learner.get("/ai/devices")
    assert listed.json() == {"results": [body], "next": None}
    assert IOS_TOKEN not in response.content.decode() and IOS_TOKEN not in listed.content.decode()


def test_the_same_token_again_is_200_the_same_device_updated():
    learner = Learner()
    first = register(learner, "android", ANDROID_TOKEN, locale="en-US").json()
    again = register(learner, "android", ANDROID_TOKEN, locale="zh-Hans-CN", appVersion="4.0")
    assert again.status_code == 200
    assert again.json()["id"] == first["id"] and again.json()["locale"] == "zh-Hans-CN"
    assert again.json()["appVersion"] == "4.0" and Device.objects.count() == 1


def test_a_token_registered_by_another_user_moves_to_the_last_registrant_with_nothing_of_the_first():
    first, second = Learner(), Learner()
    device_id = register(first, "ios", IOS_TOKEN).json()["id"]
    [pending] = push.pushes_write(user_id=first.user.pk, event_id="ntf_first", payload={"jobId": "job_x"})
    moved = register(second, "ios", IOS_TOKEN)
    assert moved.status_code == 200 and moved.json()["id"] == device_id
    assert first.get("/ai/devices").json()["results"] == []
    assert [d["id"] for d in second.get("/ai/devices").json()["results"]] == [device_id]
    assert Delivery.objects.get(id=pending).status == "dropped"  # the first user's push never reaches the second


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"platform": "ios", "token": "a1" * 31 + "a"}, "token"),  # 63 characters
        ({"platform": "ios", "token": "ab" * 100 + "a"}, "token"),  # 201
        ({"platform": "ios", "token": "g" * 64}, "token"),  # not hexadecimal
        ({"platform": "ios", "token": IOS_TOKEN + "\n"}, "token"),
        ({"platform": "android", "token": "has space"}, "token"),
        ({"platform": "android", "token": "x" * 4097}, "token"),
        ({"platform": "android", "token": ""}, "token"),
        ({"platform": "android"}, "token"),
        ({"platform": "android", "token": ["x"]}, "token"),
        ({"platform": "windows", "token": IOS_TOKEN}, "platform"),
        ({"platform": "ios", "token": IOS_TOKEN, "locale": "en_US!"}, "locale"),
        ({"platform": "ios", "token": IOS_TOKEN, "locale": "e"}, "locale"),
        ({"platform": "ios", "token": IOS_TOKEN, "appVersion": "v" * 65}, "appVersion"),
    ],
)
def test_a_bad_device_is_400_on_the_field_it_breaks(body, field):
    learner = Learner()
    response = learner.client.post("/ai/devices", body, format="json")
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert field in response.json()["error"]["fields"]
    assert Device.objects.count() == 0


def test_the_longest_tokens_each_platform_takes_are_registered():
    learner = Learner()
    assert register(learner, "ios", "F" * 200).status_code == 201
    assert register(learner, "android", "a:b_c.d-" * 512).status_code == 201


def test_one_device_more_than_the_cap_drops_the_one_registered_longest_ago(settings):
    settings.PUSH_MAX_DEVICES_PER_USER = 3
    learner = Learner()
    ids = [register(learner, "android", f"token-{n}").json()["id"] for n in range(3)]
    register(learner, "android", "token-0")  # registered again: now the newest
    newest = register(learner, "android", "token-3").json()["id"]
    kept = {d["id"] for d in learner.get("/ai/devices").json()["results"]}
    assert kept == {ids[0], ids[2], newest}
    assert not Device.objects.filter(id=ids[1]).exists()


def test_a_deleted_device_is_204_then_404_and_gets_nothing_more():
    learner, other = Learner(), Learner()
    device_id = register(learner, "ios", IOS_TOKEN).json()["id"]
    [pending] = push.pushes_write(user_id=learner.user.pk, event_id="ntf_x", payload={"jobId": "job_x"})
    assert other.client.delete(f"/ai/devices/{device_id}").status_code == 404  # another user's: as a missing one
    assert learner.client.delete(f"/ai/devices/{device_id}").status_code == 204
    again = learner.client.delete(f"/ai/devices/{device_id}")
    assert again.status_code == 404 and error_code(again) == "NOT_FOUND"
    assert Delivery.objects.get(id=pending).status == "dropped"
    assert push.pushes_write(user_id=learner.user.pk, event_id="ntf_y", payload={}) == []


def test_the_list_is_paginated_and_a_deleted_user_takes_their_devices():
    learner = Learner()
    for n in range(3):
        register(learner, "android", f"token-{n}")
    page = learner.get("/ai/devices", limit=2).json()
    assert len(page["results"]) == 2 and page["next"]
    rest = learner.get("/ai/devices", limit=2, cursor=page["next"]).json()
    assert len(rest["results"]) == 1 and rest["next"] is None
    get_user_model().objects.filter(pk=learner.user.pk).delete()
    assert Device.objects.count() == 0


def test_the_devices_api_needs_a_user():
    learner = Learner()
    learner.client.force_authenticate(None)
    assert learner.client.get("/ai/devices").status_code == 401


@pytest.mark.django_db(transaction=True)
def test_one_new_token_registered_at_once_from_many_requests_is_one_device():
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers: PostgreSQL")
    learner = Learner()
    answers = run_together(6, lambda _: register(learner.twin(), "ios", IOS_TOKEN).status_code)
    assert sorted(answers) == [200] * 5 + [201]
    assert Device.objects.count() == 1


def test_every_bad_field_is_named_at_once():
    learner = Learner()
    body = {"platform": "ios", "token": "g" * 64, "locale": "en_US!", "appVersion": "v" * 65}
    response = learner.client.post("/ai/devices", body, format="json")
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert set(response.json()["error"]["fields"]) == {"token", "locale", "appVersion"}


def test_an_ios_token_in_either_case_is_one_device():
    learner = Learner()
    first = register(learner, "ios", IOS_TOKEN.lower())
    again = register(learner, "ios", IOS_TOKEN.upper())
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"] and Device.objects.count() == 1
