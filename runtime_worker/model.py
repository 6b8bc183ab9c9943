"""DeepSeek's chat-completions API (OpenAI-compatible ``POST /chat/completions``),
asked for a JSON object, with every way it can fail mapped to the runtime error
code a runtime reports through ``fail``."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from protocol.errors import RuntimeErrorCode
from runtime_worker.api import Credential
from runtime_worker.pricing import Usage
from runtime_worker.prompts import Prompt
from runtime_worker.redact import redact

CONNECT_TIMEOUT = 5.0


class ModelError(Exception):
    """A model call that failed, with the code the runtime reports."""

    def __init__(self, code: RuntimeErrorCode, message: str, *, call: ModelCall | None = None) -> None:
        super().__init__(f"{code.code}: {message}")
        self.code = code
        self.message = redact(message)
        self.call = call


@dataclass
class ModelCall:
    """One request to the model: what the invocation log records."""

    model_name: str
    started_at: dt.datetime
    request_id: str | None = None
    http_status: int | None = None
    latency_ms: int | None = None
    usage: Usage | None = None
    content: str | None = None
    error_code: str | None = None


class ModelClient:
    """Thread-safe: one HTTP session per thread, reused across calls."""

    def __init__(self, *, max_tokens: int = 8192, temperature: float = 0.7) -> None:
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._local = threading.local()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.mount("http://", HTTPAdapter(pool_connections=2, pool_maxsize=2))
            session.mount("https://", HTTPAdapter(pool_connections=2, pool_maxsize=2))
            self._local.session = session
        return session

    def models(self, credential: Credential, *, timeout: float = 10.0) -> list[str]:
        response = self._session().get(
            _url(credential.base_url, "models"),
            headers={"Authorization": f"Bearer {credential.api_key}"},
            timeout=(CONNECT_TIMEOUT, timeout),
        )
        response.raise_for_status()
        return [model["id"] for model in response.json().get("data", [])]

    def complete_json(self, credential: Credential, prompt: Prompt, *, model_name: str, timeout: float) -> ModelCall:
        """Ask for a JSON object. Returns the call with its text content; raises
        ModelError (with the call attached) for anything but a usable answer."""
        call = ModelCall(model_name=model_name, started_at=dt.datetime.now(dt.UTC))
        body = {
            "model": model_name,
            "messages": prompt.messages(),
            "response_format": {"type": "json_object"},
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stream": False,
        }
        began = time.monotonic()
        try:
            response = self._session().post(
                _url(credential.base_url, "chat/completions"),
                json=body,
                headers={"Authorization": f"Bearer {credential.api_key}", "Accept": "application/json"},
                timeout=(CONNECT_TIMEOUT, max(0.1, timeout)),
            )
        except requests.ConnectTimeout as error:
            raise self._failed(call, began, RuntimeErrorCode.MODEL_NETWORK_ERROR, f"connect timeout: {error}") from None
        except requests.Timeout as error:
            raise self._failed(
                call, began, RuntimeErrorCode.MODEL_TIMEOUT, f"no answer in {timeout:.1f}s: {error}"
            ) from None
        except requests.RequestException as error:
            raise self._failed(
                call, began, RuntimeErrorCode.MODEL_NETWORK_ERROR, f"{type(error).__name__}: {error}"
            ) from None
        call.latency_ms = int((time.monotonic() - began) * 1000)
        call.http_status = response.status_code
        call.request_id = response.headers.get("x-request-id") or response.headers.get("x-ds-trace-id")
        status = response.status_code
        if status != 200:
            code = _status_code(status)
            raise self._failed(call, None, code, f"HTTP {status} from the model: {_error_text(response)}")
        try:
            payload = response.json()
            content = payload["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError, RecursionError):
            raise self._failed(
                call, None, RuntimeErrorCode.MODEL_RESPONSE_INVALID, "the model's answer is not a chat completion"
            ) from None
        call.request_id = call.request_id or payload.get("id")
        call.usage = Usage.from_api(payload.get("usage"))
        call.content = content if isinstance(content, str) else ""
        return call

    def _failed(self, call: ModelCall, began: float | None, code: RuntimeErrorCode, message: str) -> ModelError:
        if began is not None:
            call.latency_ms = int((time.monotonic() - began) * 1000)
        call.error_code = code.code
        call.request_id = call.request_id or f"local-{uuid.uuid4().hex}"
        return ModelError(code, message, call=call)


def _url(base_url: str, route: str) -> str:
    return f"{base_url.rstrip('/')}/{route}"


def _status_code(status: int) -> RuntimeErrorCode:
    if status == 429:
        return RuntimeErrorCode.MODEL_RATE_LIMIT
    if status >= 500 or status == 408:
        return RuntimeErrorCode.MODEL_TIMEOUT
    if status in (401, 402, 403):  # a wrong key, or an account without balance
        return RuntimeErrorCode.CREDENTIAL_RESOLVE_FAILED
    return RuntimeErrorCode.MODEL_RESPONSE_INVALID


def _error_text(response: requests.Response) -> str:
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError, RecursionError):
        message = response.text
    return redact(str(message or response.reason))[:500]


def parse_json_output(content: str) -> Any:
    """The model's JSON, tolerating a markdown fence around it. Raises ModelError
    with MODEL_JSON_PARSE_FAILED when it is not JSON."""
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    if not text.strip():
        raise ModelError(RuntimeErrorCode.MODEL_JSON_PARSE_FAILED, "the model returned no content")
    try:
        return json.loads(text)
    except ValueError as error:
        raise ModelError(RuntimeErrorCode.MODEL_JSON_PARSE_FAILED, f"the model's output is not JSON: {error}") from None
    except RecursionError:  # "[[[[...": deeper than any schema; its depth is checked with the schema
        raise ModelError(RuntimeErrorCode.MODEL_JSON_PARSE_FAILED, "the model's output nests too deep") from None
