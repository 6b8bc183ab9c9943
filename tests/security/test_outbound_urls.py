"""One reading of a URL (contract section 10), tried as an attacker would against the live
API (gunicorn): an admin tenant's config holds a stored key for the model's host; every
shape of ``baseUrl`` that two URL parsers could read as different hosts is ``400
VALIDATION_ERROR`` on ``baseUrl``, a malformed one too (never a 500), and the attacker's
recording server never sees a request, nor the key. A URL that got into the database
some other way is refused again when the worker connects."""

from __future__ import annotations

import pytest

from asynch import crypto
from asynch.models import AsynchModel
from config import outbound
from tests.support.security.egress import (  # noqa: F401  (fixtures)
    ATTACKER_HOST,
    MODEL_HOST,
    STORED_KEY,
    STORED_VALUES,
    api,
    drain,
    error,
    json_answer,
    recording,
    shared_var,
    tenant_http,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _shapes(attacker: str, model: str) -> list[str]:
    """``attacker`` and ``model`` are host:port. Each URL below is read by one parser as
    the model's origin (so the stored key would stay), by another as the attacker's."""
    return [
        f"http://{attacker}\\@{model}",  # backslash: urllib3 (and browsers) end the host at it
        f"http://{attacker}\\\\@{model}/v1",
        f"http://{attacker}/\\@{model}",
        f"http://{model}@{attacker}",  # userinfo
        f"http://user:pw@{model}",
        f"http://{attacker} @{model}",  # whitespace
        f"http://{attacker}\t@{model}",
        f"http://{model}\n",
        f" http://{model}",
        f"http://{attacker}\x00@{model}",  # control characters
        f"http://{attacker}\x7f@{model}",
        f"http://{model}\u200b",  # an invisible format character
        f"http://{attacker}%40{model}",  # percent-encoding in the host
        "http://[fe80::1%25eth0]:80",  # a zone id
        "http://[fe80::1%eth0]:80",
        "http://2130706433:80",  # numbers some parsers read as an address, others as a name
        "http://0x7f.0.0.1:80",
        "http://127.1:80",
        "http://0177.0.0.1:80",
        f"http://{model}#@{attacker}",  # a fragment
        f"http://{model.split(':')[0]}.:{model.split(':')[1]}",  # a trailing dot
        f"http://\uff4cocalhost:{model.split(':')[1]}",  # not ASCII (fullwidth letters fold to ASCII in IDNA)
    ]


MALFORMED = [
    "http://[::1",
    "http://[v1.x]:80",
    "http://[::zz]:80",
    "http://host:99999",
    "http://host:0",
    "http://host:-1",
    "http://host:8o",
    "http://host:",
    "http://",
    "http:///path",
    "http:host",
    "//host/path",
    "ftp://host",
    "javascript:alert(1)",
    "http://a..b",
    "http://" + "a" * 300,
    "",
    "%",
]


def test_a_base_url_two_parsers_read_differently_is_refused_and_the_key_never_leaves(api, shared_var):  # noqa: F811
    admin = tenant_http(api, "ops", is_admin=True)
    biz = tenant_http(api, "biz")
    with (
        recording(MODEL_HOST, lambda seen: json_answer({"ok": True})) as model,
        recording(ATTACKER_HOST) as attacker,
        recording("127.0.0.1") as local,  # localhost: an attacker's server on this machine
    ):
        assert admin.create_model("chat", model.url).status_code == 201
        shapes = _shapes(f"{ATTACKER_HOST}:{attacker.port}", f"{MODEL_HOST}:{model.port}")
        shapes.append(f"http://localhost:{local.port}\\@{MODEL_HOST}:{model.port}")  # the issue's own example
        for base_url in shapes:
            # The exact attack: move the config (keeping its stored key) with a URL one
            # parser reads as the model's origin and the connecting library as the attacker's.
            response = admin.post("/model/updateModel", {"modelName": "chat", "baseUrl": base_url})
            assert response.status_code == 400, (base_url, response.text)
            assert error(response)["code"] == "VALIDATION_ERROR", base_url
            assert list(error(response)["fields"]) == ["baseUrl"], (base_url, response.text)
            created = admin.create_model("other", base_url)
            assert created.status_code == 400 and list(error(created)["fields"]) == ["baseUrl"], base_url
        assert admin.get("/model/getModel", {"modelName": "chat"}).json()["baseUrl"] == model.url
        assert [m["modelName"] for m in admin.get("/model/listModels").json()["results"]] == ["chat"]

        biz.create_task("chat")
        assert drain()["succeeded"] == 1
        (call,) = model.seen
        assert call.headers["API_KEY"] == STORED_VALUES[0]
        assert not attacker.touched() and not local.touched()  # not a connection, let alone the key


def test_a_malformed_base_url_is_a_400_on_base_url_never_a_500(api, shared_var):  # noqa: F811
    admin = tenant_http(api, "ops", is_admin=True)
    assert admin.create_model("chat", f"http://{MODEL_HOST}:9").status_code == 201
    for base_url in MALFORMED:
        for response in (
            admin.create_model("other", base_url),
            admin.post("/model/updateModel", {"modelName": "chat", "baseUrl": base_url, "apiKey": "K:V"}),
        ):
            assert response.status_code == 400, (base_url, response.status_code, response.text)
            assert list(error(response)["fields"]) == ["baseUrl"], (base_url, response.text)


def test_a_url_stored_before_the_rule_is_refused_when_the_worker_connects(api, shared_var):  # noqa: F811
    biz = tenant_http(api, "biz")
    with recording(MODEL_HOST) as model, recording(ATTACKER_HOST) as attacker:
        # A config written past the API (an old row, a script): the worker reads it again.
        AsynchModel.objects.create(
            model_name="old",
            base_url=f"http://{ATTACKER_HOST}:{attacker.port}\\@{MODEL_HOST}:{model.port}",
            api_key_encrypted=crypto.encrypt(STORED_KEY),
            retry_times=0,
        )
        task_id = biz.create_task("old")
        drained = drain()
        assert drained.get("failed") == 1, (drained, biz.result(task_id))
        result = biz.result(task_id)
        assert result["state"] == 3 and "not called" in result["errorMessage"], result
        assert "backslash" in result["errorMessage"]
    assert not attacker.touched() and not model.touched()


def test_the_session_follows_no_redirect_even_when_asked_and_checks_every_request(settings):
    settings.ASYNCH_ALLOWED_MODEL_HOSTS = [MODEL_HOST]
    with recording(ATTACKER_HOST) as attacker:
        with recording(MODEL_HOST, lambda seen: (302, {"Location": attacker.url}, b"")) as model:
            session = outbound.session("ASYNCH_ALLOWED_MODEL_HOSTS")
            answer = session.get(model.url, allow_redirects=True, timeout=5)
            assert answer.status_code == 302 and len(model.seen) == 1
            # A host that is not listed, spelled so urllib3 would connect to it.
            with pytest.raises(outbound.OutboundRefused):
                session.get(f"http://{ATTACKER_HOST}:{attacker.port}\\@{MODEL_HOST}:{model.port}", timeout=5)
            with pytest.raises(outbound.OutboundRefused, match="not listed in ASYNCH_ALLOWED_MODEL_HOSTS"):
                session.get(attacker.url, timeout=5)
        assert not attacker.touched()
