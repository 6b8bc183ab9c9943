"""The schema as the integrator's reference (contract §1): a walk of the whole of
``/api/schema``, over whatever operations exist, for each rule. An endpoint added later
passes the same walk once it declares what it answers (``config/openapi.py``: ``raises``
or a view's ``error_codes``), says what it does (its docstring or ``extend_schema``'s
``description``) and describes its fields (``help_text``, or ``config/openapi_fields.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from config.errors import ErrorCode
from config.openapi import ERROR_WHEN
from config.schema import SchemaView
from tests.support.generated_clients import SEED_002_JOB, SEED_003_MODEL

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

# Contract §1: a value from one of these fixed sets is an enum wherever a body or a query names it.
ENUM_FIELDS = {"jobType", "targetType", "apiKeyMode", "status", "state", "platform"}
CODES = {code.code: code for code in ErrorCode}


@pytest.fixture(scope="module")
def schema(django_db_blocker: Any) -> dict[str, Any]:
    from django.test import Client

    with django_db_blocker.unblock():
        response = Client().get("/api/schema", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def operations(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            yield f"{method.upper()} {path}", operation


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while True:
        if "$ref" in node:
            node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
        elif len(node.get("allOf", [])) == 1:
            node = node["allOf"][0]
        else:
            return node


def fields(schema: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Every property of every component, and of the objects inside them."""

    def walk(where: str, node: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
        for name, field in node.get("properties", {}).items():
            yield where, name, field
            yield from walk(f"{where}.{name}", field)
            if isinstance(field.get("items"), dict):
                yield from walk(f"{where}.{name}[]", field["items"])

    for name, component in schema["components"]["schemas"].items():
        yield from walk(name, component)


def test_every_operation_has_a_summary_and_a_description_naming_each_of_its_errors(schema):
    bare = [name for name, operation in operations(schema) if not operation.get("summary")]
    assert bare == []
    for name, operation in operations(schema):
        description = operation.get("description", "")
        assert len(description) > len(operation["summary"]), name
        for status, response in operation["responses"].items():
            for code in documented_codes(schema, response):
                assert f"`{status} {code}`" in description, (name, status, code)


def documented_codes(schema: dict[str, Any], response: dict[str, Any]) -> list[str]:
    body = response.get("content", {}).get("application/json", {}).get("schema", {})
    parts = body.get("allOf", [])
    if not parts or parts[0] != {"$ref": "#/components/schemas/Error"}:
        return []
    return parts[1]["properties"]["error"]["properties"]["code"]["enum"]


def test_every_documented_error_can_come_with_its_status_and_its_example_is_that_codes_own(schema):
    walked = 0
    for name, operation in operations(schema):
        for status, response in operation["responses"].items():
            if not status.startswith(("4", "5")):
                continue
            codes = documented_codes(schema, response)
            examples = response.get("content", {}).get("application/json", {}).get("examples", {})
            if not codes:  # a view's own body for the status (a readiness report on 503)
                assert not examples, (name, status)
                continue
            for code in codes:
                assert CODES[code].http_status == int(status), (name, status, code)
            assert sorted(examples) == sorted(codes), (name, status)
            for key, example in examples.items():
                error = example["value"]["error"]
                assert error["code"] == key and error["code"] in codes, (name, status, key)
                assert error["retryable"] is CODES[key].retryable, (name, status, key)
                assert error["message"], (name, status, key)
                walked += 1
    assert walked > 300


def test_the_error_body_names_every_code_and_each_has_its_sentence(schema):
    error = schema["components"]["schemas"]["Error"]["properties"]["error"]["properties"]
    assert sorted(error["code"]["enum"]) == sorted(CODES)
    assert set(ERROR_WHEN) == set(CODES)
    assert {CODES["NOT_FOUND"].http_status, CODES["METHOD_NOT_ALLOWED"].http_status} == {404, 405}
    assert CODES["UNSUPPORTED_MEDIA_TYPE"].http_status == 415


def test_every_field_of_every_body_has_a_description(schema):
    components = schema["components"]["schemas"]

    def described(field: dict[str, Any]) -> bool:
        if field.get("description"):
            return True
        ref = field.get("$ref") or (field["allOf"][0].get("$ref") if len(field.get("allOf", [])) == 1 else None)
        return bool(ref and components[ref.rsplit("/", 1)[1]].get("description"))

    bare = [f"{where}.{name}" for where, name, field in fields(schema) if not described(field)]
    assert bare == []


def test_every_parameter_has_a_description(schema):
    bare = [
        (name, parameter["name"])
        for name, operation in operations(schema)
        for parameter in operation.get("parameters", [])
        if not parameter.get("description")
    ]
    assert bare == []


def test_every_value_of_a_fixed_set_is_an_enum_in_bodies_and_queries(schema):
    found = set()
    for where, name, field in fields(schema):
        if name in ENUM_FIELDS:
            assert "enum" in resolve(schema, field), f"{where}.{name}"
            found.add(name)
    for name, operation in operations(schema):
        for parameter in operation.get("parameters", []):
            if parameter["name"] in ENUM_FIELDS:
                assert "enum" in resolve(schema, parameter["schema"]), (name, parameter["name"])
    assert {"jobType", "targetType", "apiKeyMode", "status", "state"} <= found
    components = schema["components"]["schemas"]
    assert components["TaskStateEnum"]["enum"] == [0, 1, 2, 3, 4]
    request = components["JobCreateRequest"]["properties"]
    assert resolve(schema, request["jobType"]) is components["JobTypeEnum"]
    assert resolve(schema, request["targetType"]) is components["TargetTypeEnum"]


def test_no_request_field_is_required_of_a_client_unless_the_server_requires_it(schema):
    """A default is the server's: a request property with one is required by
    openapi-typescript's types. The default is said in the description instead."""
    components = schema["components"]["schemas"]
    with_default = [
        f"{where}.{name}"
        for where, name, field in fields(schema)
        if where.split(".")[0].endswith("Request") and "default" in field
    ]
    assert with_default == []
    job = components["JobCreateRequest"]
    assert sorted(job["required"]) == ["jobType", "targetId", "targetType"]
    assert "Default when left out: `0`" in job["properties"]["priority"]["description"]


def test_the_seeds_bodies_are_the_request_examples(schema):
    def example(path: str) -> dict[str, Any]:
        [only] = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["examples"].values()
        return only["value"]

    assert example("/ai/jobs") == SEED_002_JOB
    model = example("/model/createModel")
    assert {key: value for key, value in model.items() if key != "baseUrl"} == SEED_003_MODEL


def test_the_schema_is_built_once_per_process_and_served_as_the_same_bytes(client, monkeypatch):
    SchemaView.forget()
    built = []
    original = SchemaView._get_schema_response

    def counted(self, request):  # type: ignore[no-untyped-def]
        built.append(request.path)
        return original(self, request)

    monkeypatch.setattr(SchemaView, "_get_schema_response", counted)
    first = client.get("/api/schema", HTTP_ACCEPT="application/json")
    again = client.get("/api/schema", HTTP_ACCEPT="application/json")
    yaml = client.get("/api/schema")
    yaml_again = client.get("/api/schema")
    assert first.status_code == again.status_code == yaml.status_code == 200
    assert first.content == again.content and yaml.content == yaml_again.content
    assert first["Content-Type"].startswith("application/json") and yaml.content.startswith(b"openapi: 3")
    assert built == ["/api/schema"]
