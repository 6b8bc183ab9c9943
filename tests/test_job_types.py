"""One declaration per job type (ai_jobs/JOB_TYPES.md): a sixth job type declared
here, with its schema and its prompt and nothing else, is created through
``POST /ai/jobs`` (its targets and its count parameter checked), claimed by a runtime
that names it, its prompt rendered by the reference runtime's renderer, answered
through the internal API (its own schema deciding), and its outputs and notice
listed through the user API. The five built-in types are declared the same way."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from ai_jobs import job_types
from ai_jobs.job_types import registry
from ai_jobs.job_types.common import counted
from ai_jobs.models import AiRuntimeJob, AiRuntimeResult, NextActionRecommendation, TargetType
from ai_jobs.outputs import RECOMMENDATIONS
from ai_jobs.outputs.analyses import store_recommendations
from runtime_worker import prompts
from tests.support.api import ALL_TYPES, RuntimeClient, error_code
from tests.support.user_api import Learner

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

# --- the sixth job type: its declaration, its schema, its prompt ------------------------------------

NAME = "review_scheduling"

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": f"{NAME} output v1",
    "type": "object",
    "additionalProperties": False,
    "required": ["sessions"],
    "properties": {
        "sessions": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["day", "title", "minutes"],
                "properties": {
                    "day": {"type": "integer", "minimum": 1, "maximum": 5},
                    "title": {"type": "string", "minLength": 1, "maxLength": 200},
                    "minutes": {"type": "integer", "minimum": 1},
                },
            },
        }
    },
}

PROMPT = """=== system ===
You plan review sessions for a learner. Answer with one JSON object that validates against this JSON Schema ($output_schema_version):
$output_schema

=== user ===
Job type: $job_type
Target: $target_type $target_id
<snapshot>
$snapshot_json
</snapshot>
<params>
$params_json
</params>
"""


def store_sessions(job: AiRuntimeJob, output: dict[str, Any], result: AiRuntimeResult) -> None:
    """Each session becomes a review recommendation, its day the priority: the
    recommendations' own store, given the sessions in their shape."""
    recommendations = [
        {
            "actionType": "review",
            "title": session["title"],
            "description": f"Day {session['day']}",
            "priority": session["day"],
            "estimatedMinutes": session["minutes"],
        }
        for session in output["sessions"]
    ]
    store_recommendations(job, {"recommendations": recommendations}, result)


def declaration(schema_dir: Path) -> job_types.JobType:
    return job_types.JobType(
        name=NAME,
        label="Review plan",
        target_types=frozenset({TargetType.USER.value, TargetType.KNOWLEDGE_BASE.value}),
        count=job_types.CountParam(name="sessionCount", low=1, high=5, default=3),
        store=store_sessions,
        outputs=(NextActionRecommendation,),
        lists=(RECOMMENDATIONS,),
        notice=counted(NextActionRecommendation, "review session", "{} planned.", "sessions"),
        schema_dir=schema_dir,
    )


@pytest.fixture
def sixth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Declare the type (for this test only) with its schema and prompt in their files."""
    (tmp_path / "schemas" / "v1").mkdir(parents=True)
    (tmp_path / "schemas" / "v1" / f"{NAME}.json").write_text(json.dumps(SCHEMA))
    (tmp_path / "prompts" / "v1").mkdir(parents=True)
    (tmp_path / "prompts" / "v1" / f"{NAME}.txt").write_text(PROMPT)
    monkeypatch.setattr(registry, "_TYPES", dict(registry._TYPES))  # forgotten again after the test
    job_types.register(declaration(tmp_path / "schemas"))
    return tmp_path


def test_a_sixth_job_type_declared_here_is_created_claimed_answered_and_listed(
    sixth: Path, settings, django_capture_on_commit_callbacks
):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the notice is written when the result commits
    learner = Learner()
    runtime = RuntimeClient("runtime-6")

    refused = learner.job(NAME, targetType="material", targetId="mat_1")
    assert refused.status_code == 400 and error_code(refused) == "INVALID_TARGET_TYPE"
    too_many = learner.job(NAME, sessionCount=6)
    assert too_many.status_code == 400 and "sessionCount" in too_many.json()["error"]["fields"]
    assert learner.job(NAME, idempotencyKey="default").json()["params"] == {"sessionCount": 3}
    created = learner.job(NAME, sessionCount=2)
    assert created.status_code == 201, created.json()
    job_id = created.json()["jobId"]
    assert created.json()["params"] == {"sessionCount": 2}

    # A runtime that knows the type claims it; one that asks only for the others does not.
    assert runtime.claim(ALL_TYPES).json()["jobs"] == []
    claimed = {job["jobId"]: job for job in runtime.claim([NAME]).json()["jobs"]}
    job = claimed[job_id]
    assert runtime.heartbeat(job_id).status_code == 200
    snapshot = runtime.get(f"jobs/{job_id}/snapshot").json()

    prompt = prompts.render(
        job_type=NAME,
        prompt_version=job["promptVersion"],
        output_schema_version=job["outputSchemaVersion"],
        target_type=job["targetType"],
        target_id=job["targetId"],
        snapshot=snapshot["data"],
        params=job["params"],
        prompt_dir=sixth / "prompts",
        schema_dir=sixth / "schemas",
    )
    assert f'"title": "{NAME} output v1"' in prompt.system and f"Job type: {NAME}" in prompt.user
    assert '"sessionCount": 2' in prompt.user

    wrong = runtime.result(job_id, job["attemptNo"], {"recommendations": []})
    assert wrong.status_code == 422 and error_code(wrong) == "RESULT_SCHEMA_UNSUPPORTED"
    output = {
        "sessions": [{"day": 1, "title": "Fractions", "minutes": 20}, {"day": 3, "title": "Decimals", "minutes": 15}]
    }
    with django_capture_on_commit_callbacks(execute=True):
        answered = runtime.result(job_id, job["attemptNo"], output, outputSchemaVersion="v1")
    assert answered.status_code == 200 and answered.json()["status"] == "succeeded"

    listed = learner.get("/ai/recommendations", jobId=job_id).json()["results"]
    assert [(item["title"], item["priority"], item["estimatedMinutes"]) for item in listed] == [
        ("Fractions", 1, 20),
        ("Decimals", 3, 15),
    ]
    assert job_id in [job["jobId"] for job in learner.get("/ai/jobs", jobType=NAME).json()["results"]]
    assert learner.get(f"/ai/jobs/{job_id}").json()["status"] == "succeeded"
    [notice_body] = learner.get("/ai/notifications", jobId=job_id).json()["results"]
    assert notice_body["title"] == "Review plan ready" and notice_body["message"] == "2 review sessions planned."
    assert notice_body["data"] == {"sessions": 2} and notice_body["jobType"] == NAME


def test_a_type_no_declaration_names_is_refused_everywhere(sixth: Path):
    learner = Learner()
    response = learner.job("astrology_reading")
    assert response.status_code == 400 and error_code(response) == "INVALID_JOB_TYPE"
    assert NAME in response.json()["error"]["message"]  # the sixth is one of the types offered
    # A capability the server does not know matches nothing, it is not an error (a newer runtime may know more types).
    claimed = RuntimeClient().claim(["astrology_reading"])
    assert claimed.status_code == 200 and claimed.json() == {"jobs": []}


def test_every_built_in_type_is_declared_once_with_its_schema_and_prompt():
    assert job_types.names() == ALL_TYPES
    for declared in job_types.all_types():
        assert declared.schema_versions() == ["v1"], declared.name
        prompts.check(declared.name, "v1", "v1")  # the runtime has its prompt and schema
        assert declared.outputs and declared.lists and declared.label
    assert [output.path for output in job_types.output_lists()] == [
        "analyses",
        "weak-points",
        "recommendations",
        "quizzes",
        "flashcards",
    ]
    with pytest.raises(ValueError, match="already registered"):  # a second declaration of a name
        job_types.register(dataclasses.replace(job_types.get(ALL_TYPES[0]), label="Another"))
