"""What the push tests share: the stand-ins as a module-scoped fixture, the settings
that point the senders at them, the compiled catalogues, and a job finished through
the internal API's result path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command

from ai_jobs.models import Notification
from tests.support.api import RuntimeClient
from tests.support.factories import VALID_OUTPUTS
from tests.support.push_standins import PushStandins, start_push_standins
from tests.support.user_api import Learner

ROOT = Path(__file__).resolve().parents[2]
IOS_TOKEN = "a1" * 32  # 64 hexadecimal characters
IOS_TOKEN_2 = "b2" * 40
ANDROID_TOKEN = "fcm-token:APA91b" + "x" * 140
ANDROID_TOKEN_2 = "fcm-token:APA91b" + "y" * 140


def compile_catalogues() -> None:
    """make test compiles them; a bare pytest run does it here when they are missing or stale."""
    po = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
    mo = po.with_suffix(".mo")
    if not mo.exists() or mo.stat().st_mtime < po.stat().st_mtime:
        call_command(
            "compilemessages", locale=["zh_Hans"], ignore_patterns=[".venv*", "var", "node_modules"], verbosity=0
        )


@pytest.fixture(scope="module", name="standins")
def standins_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PushStandins]:
    compile_catalogues()
    started = start_push_standins(tmp_path_factory.mktemp("push"))
    yield started
    started.close()


@pytest.fixture(name="push_settings")
def push_settings_fixture(settings, standins: PushStandins) -> PushStandins:
    for name, value in standins.settings().items():
        setattr(settings, name, value)
    settings.CELERY_TASK_ALWAYS_EAGER = True
    standins.reset()
    return standins


def register(learner: Learner, platform: str, token: str, **body: str):
    return learner.client.post("/ai/devices", {"platform": platform, "token": token, **body}, format="json")


def finish_job(learner: Learner, runtime: RuntimeClient, capture, job_type: str = "learning_state_analysis") -> str:
    """A job of the learner, created through the user API and finished through the
    internal API's result call, with what it left for after commit run (the pushes'
    tasks: eager, as a worker would run them). Its id."""
    created = learner.job(job_type)
    assert created.status_code == 201, created.json()
    job_id = created.json()["jobId"]
    attempt = runtime.lock(job_id).json()["attemptNo"]
    with capture(execute=True):
        answered = runtime.result(job_id, attempt, VALID_OUTPUTS[job_type])
    assert answered.status_code == 200, answered.json()
    return job_id


def notice_of(job_id: str) -> Notification:
    return Notification.objects.get(job_id=job_id)
