"""The platform's APIs as the tests call them: a runtime on the internal API through
DRF's test client (with the token the suite's settings admit), a user on the user
API, and an error answer's code."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

RUNTIME_TOKEN = "test-runtime-token-0123456789abcdef"


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


def user_client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def error_code(response: Any) -> str:
    return response.json()["error"]["code"]
