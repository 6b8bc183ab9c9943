from __future__ import annotations

import os

import pytest
from django.conf import LazySettings
from django.core.cache import cache
from rest_framework.test import APIClient

from quotas import selectors as quota_selectors
from tests.support.factories import UserFactory

RUNTIME_TOKEN = "test-runtime-token"
# The suite's model services are local stand-ins on 127.0.0.1: listed, as make run lists
# its own, for this process and every server and worker a test starts (tests/security/
# proves the refusal without it).
MODEL_HOSTS = "127.0.0.1"
os.environ["ASYNCH_ALLOWED_MODEL_HOSTS"] = MODEL_HOSTS


@pytest.fixture(autouse=True)
def _runtime_settings(settings: LazySettings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.RUNTIME_SERVICE_TOKENS = [RUNTIME_TOKEN, "test-runtime-token-next"]
    settings.PLATFORM_DEEPSEEK_API_KEY = "sk-platform-test-key"
    settings.RUNTIME_THROTTLE_RATE = "100000/min"
    settings.USER_THROTTLE_RATE = "100000/min"
    settings.AUTH_THROTTLE_RATE = "100000/min"
    settings.ASYNCH_ALLOWED_MODEL_HOSTS = MODEL_HOSTS.split(",")
    cache.clear()
    quota_selectors.breaker_state_forget()  # a test's breaker is the database's, not a hint read by an earlier test


class RuntimeClient:
    """A runtime talking to the internal API through DRF's test client."""

    def __init__(self, instance_id: str = "runtime-1", token: str = RUNTIME_TOKEN) -> None:
        self.instance_id = instance_id
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_X_RUNTIME_INSTANCE_ID=instance_id)

    def post(self, path: str, body: dict | None = None):
        return self.client.post(f"/internal/runtime/{path}", body or {}, format="json")

    def get(self, path: str):
        return self.client.get(f"/internal/runtime/{path}")

    def claim(self, capabilities: list[str] | None = None, limit: int = 10):
        return self.post("jobs/claim", {"capabilities": capabilities or ALL_TYPES, "limit": limit})

    def lock(self, job_id: str):
        return self.post(f"jobs/{job_id}/lock")

    def heartbeat(self, job_id: str):
        return self.post(f"jobs/{job_id}/heartbeat")

    def result(self, job_id: str, attempt_no: int, output: dict, **extra):
        return self.post(f"jobs/{job_id}/result", {"attemptNo": attempt_no, "output": output, **extra})

    def fail(self, job_id: str, attempt_no: int, code: str, message: str = "boom"):
        return self.post(f"jobs/{job_id}/fail", {"attemptNo": attempt_no, "errorCode": code, "errorMessage": message})


ALL_TYPES = [
    "learning_state_analysis",
    "weak_point_analysis",
    "next_action_planning",
    "quiz_generation",
    "flashcard_generation",
]


@pytest.fixture
def runtime() -> RuntimeClient:
    return RuntimeClient("runtime-1")


@pytest.fixture
def other_runtime() -> RuntimeClient:
    return RuntimeClient("runtime-2")


@pytest.fixture
def user(db):
    return UserFactory()


def error_code(response) -> str:
    return response.json()["error"]["code"]
