"""Cheap polling (contract 11.4): GET /ai/jobs/{jobId} and GET /ai/notifications
answer with a strong ETag; If-None-Match naming it answers 304 with no body, and once
the resource moves the answer is 200 with a new tag."""

from __future__ import annotations

import pytest

from tests.support.api import RuntimeClient
from tests.support.factories import VALID_OUTPUTS
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def conditional_get(learner: Learner, path: str, tag: str | None = None, **params: str):
    headers = {"HTTP_IF_NONE_MATCH": tag} if tag else {}
    return learner.client.get(path, params, **headers)


def strong(tag: str) -> bool:
    return tag.startswith('"') and tag.endswith('"') and not tag.startswith("W/")


def test_a_job_answers_304_to_its_own_tag_and_200_with_a_new_tag_once_it_moves(runtime: RuntimeClient):
    learner = Learner()
    job_id = learner.job().json()["jobId"]
    path = f"/ai/jobs/{job_id}"
    first = conditional_get(learner, path)
    tag = first["ETag"]
    assert first.status_code == 200 and strong(tag)

    same = conditional_get(learner, path, tag)
    assert same.status_code == 304 and same.content == b"" and same["ETag"] == tag
    assert conditional_get(learner, path, f'"other", {tag}').status_code == 304  # a list naming it
    assert conditional_get(learner, path, f"W/{tag}").status_code == 304  # If-None-Match compares weakly
    assert conditional_get(learner, path, '"stale"').status_code == 200

    attempt = runtime.lock(job_id).json()["attemptNo"]  # the job moves: locked
    moved = conditional_get(learner, path, tag)
    assert moved.status_code == 200 and moved.json()["status"] == "locked"
    assert moved["ETag"] != tag and strong(moved["ETag"])
    assert conditional_get(learner, path, moved["ETag"]).status_code == 304

    runtime.result(job_id, attempt, VALID_OUTPUTS["learning_state_analysis"])
    done = conditional_get(learner, path, moved["ETag"])
    assert done.status_code == 200 and done.json()["status"] == "succeeded" and done["ETag"] != moved["ETag"]


def test_another_users_job_is_404_whatever_tag_is_sent():
    owner, other = Learner(), Learner()
    job_id = owner.job().json()["jobId"]
    tag = conditional_get(owner, f"/ai/jobs/{job_id}")["ETag"]
    assert conditional_get(other, f"/ai/jobs/{job_id}", tag).status_code == 404


def test_the_notices_answer_304_until_one_is_added_or_read(runtime: RuntimeClient):
    learner = Learner()
    empty = conditional_get(learner, "/ai/notifications")
    assert empty.status_code == 200 and strong(empty["ETag"])
    assert conditional_get(learner, "/ai/notifications", empty["ETag"]).status_code == 304

    job_id = learner.job().json()["jobId"]
    attempt = runtime.lock(job_id).json()["attemptNo"]
    runtime.result(job_id, attempt, VALID_OUTPUTS["learning_state_analysis"])
    added = conditional_get(learner, "/ai/notifications", empty["ETag"])
    assert added.status_code == 200 and len(added.json()["results"]) == 1 and added["ETag"] != empty["ETag"]
    assert conditional_get(learner, "/ai/notifications", added["ETag"]).status_code == 304
    # The tag follows what is answered: a filter that leaves nothing out answers the same list.
    assert conditional_get(learner, "/ai/notifications", added["ETag"], isRead="false").status_code == 304
    read_only = conditional_get(learner, "/ai/notifications", added["ETag"], isRead="true")
    assert read_only.status_code == 200 and read_only.json()["results"] == []

    notice_id = added.json()["results"][0]["id"]
    learner.client.post(f"/ai/notifications/{notice_id}/read")
    read = conditional_get(learner, "/ai/notifications", added["ETag"])
    assert read.status_code == 200 and read.json()["results"][0]["isRead"] is True and read["ETag"] != added["ETag"]
