"""The reference runtime's model side without the server: pricing, prompts, and the
stand-in model and the model client over real HTTP (every way a call fails, mapped to
the code the runtime reports)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from ai_jobs import output_schemas
from runtime_worker import pricing, prompts
from runtime_worker.api import wire_cents
from runtime_worker.model import ModelClient, ModelError, parse_json_output
from tests.support import runtime_fixtures
from tests.support.api import ALL_TYPES
from tests.support.runtime_fixtures import free_port
from tests.support.runtime_worker import SNAPSHOT_DATA, credential, prompt

standin = runtime_fixtures.standin
_no_leftover_faults = runtime_fixtures._no_leftover_faults


# --- pricing --------------------------------------------------------------------------------


def test_cost_prices_cache_hits_misses_and_output_separately():
    usage = pricing.Usage.from_api(
        {
            "prompt_tokens": 1000,
            "completion_tokens": 500,
            "total_tokens": 1500,
            "prompt_cache_hit_tokens": 600,
            "prompt_cache_miss_tokens": 400,
        }
    )
    # (600 x 0.028 + 400 x 0.28 + 500 x 0.42) USD per million tokens, in cents
    assert pricing.cost_cents("deepseek-chat", usage) == Decimal("0.0339")
    assert usage.wire() == {"promptTokens": 1000, "completionTokens": 500, "totalTokens": 1500}


@pytest.mark.parametrize("cents", ["0.0339", "0", "1.5", "12345.6789", "9999999999.9999"])
def test_a_cost_goes_on_the_wire_as_the_json_number_the_schema_documents_and_comes_back_exact(cents):
    sent = json.dumps({"costCents": wire_cents(Decimal(cents))})
    assert isinstance(json.loads(sent)["costCents"], float)
    assert Decimal(str(json.loads(sent)["costCents"])) == Decimal(cents)  # as the server reads it


def test_a_prompt_without_a_cache_split_is_priced_as_all_misses_and_an_unknown_model_as_deepseek_chat():
    usage = pricing.Usage.from_api({"prompt_tokens": 1_000_000, "completion_tokens": 0})
    assert (usage.cache_hit_tokens, usage.cache_miss_tokens, usage.total_tokens) == (0, 1_000_000, 1_000_000)
    assert pricing.cost_cents("some-new-model", usage) == pricing.cost_cents("deepseek-chat", usage) == Decimal("28")
    cached = pricing.Usage.from_api({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 64}})
    assert (cached.cache_hit_tokens, cached.cache_miss_tokens) == (64, 36)


# --- prompts ------------------------------------------------------------------------------


@pytest.mark.parametrize("job_type", ALL_TYPES)
def test_every_job_type_has_a_v1_prompt_with_its_schema_and_the_snapshot(job_type):
    prompt = prompts.render(
        job_type=job_type,
        prompt_version="v1",
        output_schema_version="v1",
        target_type="knowledge_base",
        target_id="kb_1",
        snapshot=SNAPSHOT_DATA,
        params={"questionCount": 7, "cardCount": 9},
    )
    assert json.dumps(output_schemas.schema(job_type, "v1"), sort_keys=True) in prompt.system
    assert "json" in prompt.system.lower()  # DeepSeek's JSON mode requires the word
    assert '"Fractions"' in prompt.user and f"Job type: {job_type}" in prompt.user
    assert "$" not in prompt.user
    if job_type == "quiz_generation":
        assert "Write 7 quiz questions" in prompt.user
    if job_type == "flashcard_generation":
        assert "Write 9 flashcards" in prompt.user
    assert [m["role"] for m in prompt.messages()] == ["system", "user"]


def test_a_prompt_version_without_templates_or_a_path_outside_them_is_unknown():
    assert sorted(prompts.job_types()) == sorted(ALL_TYPES)
    with pytest.raises(prompts.UnknownPrompt):
        prompts.check("learning_state_analysis", "v999", "v1")
    with pytest.raises(prompts.UnknownPrompt):
        prompts.check("../v1/learning_state_analysis", "v1", "v1")
    with pytest.raises(output_schemas.UnknownSchema):
        prompts.check("learning_state_analysis", "v1", "v999")


# --- the stand-in and the model client over HTTP ---------------------------------------------


@pytest.mark.parametrize("job_type", ALL_TYPES)
def test_the_standin_answers_each_job_type_with_a_schema_valid_output_from_the_snapshot(standin, job_type):
    call = ModelClient().complete_json(
        credential(standin.base_url), prompt(job_type, questionCount=3), model_name="deepseek-chat", timeout=10
    )
    output = parse_json_output(call.content)
    assert output_schemas.validation_errors(job_type, "v1", output) == []
    assert call.http_status == 200 and call.request_id and call.usage.prompt_tokens > 0
    assert "Fractions" in call.content  # derived from the snapshot, not canned
    if job_type == "weak_point_analysis":
        assert output["weakPoints"][0]["knowledgePointId"] == "kp_1"  # the weakest first
    if job_type == "quiz_generation":
        assert len(output["questions"]) == 3


def test_the_standin_lists_models_reports_cache_hits_and_wants_a_key(standin):
    client = ModelClient()
    assert client.models(credential(standin.base_url)) == ["deepseek-chat", "deepseek-reasoner"]
    first = client.complete_json(credential(standin.base_url), prompt(), model_name="deepseek-chat", timeout=10)
    again = client.complete_json(credential(standin.base_url), prompt(), model_name="deepseek-chat", timeout=10)
    assert again.usage.cache_hit_tokens > 0 and again.usage.cache_hit_tokens % 64 == 0
    assert again.usage.cache_hit_tokens + again.usage.cache_miss_tokens == first.usage.prompt_tokens
    with pytest.raises(ModelError) as refused:
        client.complete_json(credential(standin.base_url, key=""), prompt(), model_name="deepseek-chat", timeout=10)
    assert refused.value.code.code == "CREDENTIAL_RESOLVE_FAILED"


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        ({"status": 429}, "MODEL_RATE_LIMIT"),
        ({"status": 500}, "MODEL_TIMEOUT"),
        ({"status": 503}, "MODEL_TIMEOUT"),
        ({"delay": 2.0}, "MODEL_TIMEOUT"),
        ({"drop": True}, "MODEL_NETWORK_ERROR"),
        ({"status": 400}, "MODEL_RESPONSE_INVALID"),
    ],
)
def test_model_failures_map_to_the_codes_the_runtime_reports(standin, fault, code):
    standin.model.add_faults([fault])
    with pytest.raises(ModelError) as failed:
        ModelClient().complete_json(credential(standin.base_url), prompt(), model_name="deepseek-chat", timeout=0.5)
    assert failed.value.code.code == code
    assert failed.value.call is not None and failed.value.call.error_code == code


def test_a_model_nobody_listens_for_is_a_network_error():
    with pytest.raises(ModelError) as failed:
        ModelClient().complete_json(
            credential(f"http://127.0.0.1:{free_port()}"), prompt(), model_name="deepseek-chat", timeout=1
        )
    assert failed.value.code.code == "MODEL_NETWORK_ERROR"


def test_output_that_is_not_json_fails_to_parse_and_a_fenced_one_is_accepted(standin):
    standin.model.add_faults([{"badJson": True}])
    call = ModelClient().complete_json(credential(standin.base_url), prompt(), model_name="deepseek-chat", timeout=5)
    with pytest.raises(ModelError) as failed:
        parse_json_output(call.content)
    assert failed.value.code.code == "MODEL_JSON_PARSE_FAILED"
    with pytest.raises(ModelError):
        parse_json_output("   ")
    assert parse_json_output('```json\n{"a": 1}\n```') == {"a": 1}


def test_the_standin_takes_faults_over_its_control_endpoint_and_counts_requests(standin):
    import requests

    client = ModelClient()
    assert requests.post(f"{standin.base_url}/_standin/faults", json=["not", "an", "object"]).status_code == 400
    set_faults = requests.post(f"{standin.base_url}/_standin/faults", json={"faults": [{"status": 429, "times": 2}]})
    assert set_faults.status_code == 200
    for _ in range(2):
        with pytest.raises(ModelError) as limited:
            client.complete_json(credential(standin.base_url), prompt(), model_name="deepseek-chat", timeout=5)
        assert limited.value.code.code == "MODEL_RATE_LIMIT"
    assert client.complete_json(credential(standin.base_url), prompt(), model_name="deepseek-chat", timeout=5)
    requests.post(f"{standin.base_url}/_standin/faults", json={"faults": [{"status": 500, "times": None}]})
    assert requests.delete(f"{standin.base_url}/_standin/faults").status_code == 200
    assert client.complete_json(credential(standin.base_url), prompt(), model_name="deepseek-chat", timeout=5)
    assert requests.get(f"{standin.base_url}/_standin/stats").json()["job:learning_state_analysis"] == 4


def test_the_standin_takes_faults_by_marker_and_only_for_matching_prompts(standin):
    client = ModelClient()
    standin.model.add_faults([{"status": 429, "match": "only-this-one"}])
    assert client.complete_json(credential(standin.base_url), prompt(), model_name="deepseek-chat", timeout=5)
    with pytest.raises(ModelError) as marked:
        client.complete_json(
            credential(standin.base_url), prompt(note="[standin:502]"), model_name="deepseek-chat", timeout=5
        )
    assert marked.value.code.code == "MODEL_TIMEOUT"
    with pytest.raises(ModelError) as matched:
        client.complete_json(
            credential(standin.base_url), prompt(note="only-this-one"), model_name="deepseek-chat", timeout=5
        )
    assert matched.value.code.code == "MODEL_RATE_LIMIT"
