"""Pausing a job type (contract section 12): its jobs are still created and wait
``pending``; claim and poll pass over them, lock answers ``409 JOB_NOT_ACTIVE`` naming
the pause; jobs already running finish; the command, the admin page (its own
permission), the dashboard and ``aijobs_job_type_paused`` show it."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ai_jobs import pauses, services
from ai_jobs.models import AiRuntimeJob, JobTypePause
from tests.support.api import ALL_TYPES, RuntimeClient, error_code
from tests.support.factories import VALID_OUTPUTS
from tests.support.ops import Scrape
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def _claimed_types(runtime: RuntimeClient) -> list[str]:
    response = runtime.claim(ALL_TYPES, limit=50)
    assert response.status_code == 200
    return [job["jobType"] for job in response.json()["jobs"]]


def _paused_gauge(client: Client) -> dict[str, float]:
    scrape = Scrape.parse(client.get("/metrics").content.decode())
    return {labels["job_type"]: value for name, labels, value in scrape.samples if name == "aijobs_job_type_paused"}


def test_a_paused_type_is_created_but_not_handed_out_until_resumed():
    learner, runtime = Learner(), RuntimeClient()
    out = StringIO()
    call_command("job_types", "pause", "quiz_generation", "--reason", "bad prompt v7", stdout=out)
    assert "paused: quiz_generation" in out.getvalue()

    quiz = learner.quiz()
    assert quiz.status_code == 201 and quiz.json()["status"] == "pending"
    quiz_id = quiz.json()["jobId"]
    other = learner.job("learning_state_analysis").json()["jobId"]

    polled = runtime.post("jobs/poll", {"capabilities": ALL_TYPES, "limit": 50}).json()["jobs"]
    assert [job["jobId"] for job in polled] == [other]
    assert _claimed_types(runtime) == ["learning_state_analysis"]
    locked = runtime.lock(quiz_id)
    assert locked.status_code == 409 and error_code(locked) == "JOB_NOT_ACTIVE"
    assert "quiz_generation is paused" in locked.json()["error"]["message"]
    assert AiRuntimeJob.objects.get(id=quiz_id).status == "pending"

    gauge = _paused_gauge(Client())
    assert gauge == {name: (1.0 if name == "quiz_generation" else 0.0) for name in ALL_TYPES}

    listed = StringIO()
    call_command("job_types", "list", stdout=listed)
    lines = {line.split()[0]: line for line in listed.getvalue().splitlines()}
    assert "paused since" in lines["quiz_generation"] and "bad prompt v7" in lines["quiz_generation"]
    assert "not paused" in lines["flashcard_generation"]

    call_command("job_types", "resume", "quiz_generation", stdout=StringIO())
    assert _claimed_types(runtime) == ["quiz_generation"]
    assert _paused_gauge(Client())["quiz_generation"] == 0


def test_a_job_running_when_its_type_is_paused_finishes():
    learner, runtime = Learner(), RuntimeClient()
    job_id = learner.job("learning_state_analysis").json()["jobId"]
    assert _claimed_types(runtime) == ["learning_state_analysis"]
    services.job_types_pause(names=["learning_state_analysis"], by="test")
    assert runtime.heartbeat(job_id).status_code == 200
    done = runtime.result(job_id, 1, VALID_OUTPUTS["learning_state_analysis"])
    assert done.status_code == 200 and done.json()["status"] == "succeeded"


def test_the_command_refuses_an_unknown_type_and_pausing_twice_keeps_the_first():
    with pytest.raises(CommandError, match="Not a job type: quiz"):
        call_command("job_types", "pause", "quiz", stdout=StringIO())
    assert services.job_types_pause(names=["quiz_generation"], by="first") == ["quiz_generation"]
    assert services.job_types_pause(names=["quiz_generation"], by="second") == []
    assert JobTypePause.objects.get().paused_by == "first"
    assert services.job_types_resume(names=["quiz_generation", "flashcard_generation"]) == ["quiz_generation"]


def test_a_claim_reads_the_paused_set_at_most_once_in_a_while():
    runtime = RuntimeClient()
    services.job_types_pause(names=["quiz_generation"], by="test")
    runtime.claim(ALL_TYPES)  # the first claim after a pause reads the set
    with CaptureQueriesContext(connection) as claims:
        for _ in range(5):
            runtime.claim(ALL_TYPES)
    assert not [q for q in claims.captured_queries if "ai_job_type_pause" in q["sql"]]
    pauses.forget()
    with CaptureQueriesContext(connection) as again:
        runtime.claim(ALL_TYPES)
    assert [q for q in again.captured_queries if "ai_job_type_pause" in q["sql"]]


def _staff(username: str, *codenames: str) -> Client:
    user = get_user_model().objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def test_the_admin_page_pauses_and_resumes_with_its_own_permission():
    viewer = _staff("viewer", "view_airuntimejob")
    page = viewer.get("/admin/ai_jobs/jobtypepause/")
    assert page.status_code == 200 and "quiz_generation" in page.content.decode()
    assert 'value="Pause"' not in page.content.decode()
    refused = viewer.post("/admin/ai_jobs/jobtypepause/", {"job_type": "quiz_generation", "verb": "pause"})
    assert refused.status_code == 403 and not JobTypePause.objects.exists()

    operator = _staff("pauser", "pause_jobtype", "view_airuntimejob")
    assert 'value="Pause"' in operator.get("/admin/ai_jobs/jobtypepause/").content.decode()
    done = operator.post(
        "/admin/ai_jobs/jobtypepause/", {"job_type": "quiz_generation", "verb": "pause", "reason": "v7"}, follow=True
    )
    assert "Job type quiz_generation paused" in done.content.decode()
    pause = JobTypePause.objects.get()
    assert (pause.job_type, pause.paused_by, pause.reason) == ("quiz_generation", "pauser", "v7")
    assert LogEntry.objects.filter(object_id="quiz_generation", change_message__contains="paused").exists()
    dashboard = operator.get("/admin/ai_jobs/airuntimejob/dashboard/?partial=1").content.decode()
    assert 'class="paused"' in dashboard and "by pauser" in dashboard

    operator.post("/admin/ai_jobs/jobtypepause/", {"job_type": "quiz_generation", "verb": "resume"})
    assert not JobTypePause.objects.exists()
    assert 'class="paused"' not in operator.get("/admin/ai_jobs/airuntimejob/dashboard/?partial=1").content.decode()
