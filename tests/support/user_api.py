"""Helpers for the user API tests: a learner with a JWT-authenticated client."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from credentials import services as credential_services
from tests.support.factories import UserFactory, consent
from tests.support.learning_factories import KnowledgeBaseFactory


class Learner:
    """A learner who turned AI analysis on (``consented=False``: one who has not)."""

    def __init__(self, *, consented: bool = True, **user_fields: Any) -> None:
        self.user = UserFactory(**user_fields)
        if consented:
            consent(self.user)
        self.client = APIClient()
        self.client.force_authenticate(self.user)

    def twin(self) -> Learner:
        """The same user with a client of its own (one client per thread)."""
        twin = Learner.__new__(Learner)
        twin.user = self.user
        twin.client = APIClient()
        twin.client.force_authenticate(self.user)
        return twin

    def job(self, job_type: str = "learning_state_analysis", **body: Any):
        payload = {"jobType": job_type, "targetType": "user", "targetId": "me", **body}
        return self.client.post("/ai/jobs", payload, format="json")

    def quiz(self, **body: Any):
        kb = body.pop("kb", None) or KnowledgeBaseFactory(user=self.user)
        return self.job("quiz_generation", targetType="knowledge_base", targetId=kb.id, **body)

    def credential(self) -> str:
        return credential_services.credential_create(user=self.user, name="mine", api_key="sk-" + "a" * 32).id

    def get(self, path: str, **params: Any):
        return self.client.get(path, params)

    def patch(self, path: str, body: dict[str, Any]):
        return self.client.patch(path, body, format="json")
