"""The stand-in's behaviour, without HTTP: the chat completion (DeepSeek's rules for
JSON mode and models, its usage with a simulated context cache) and its faults."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from runtime_worker.standin.answers import build_output

MODELS = ("deepseek-chat", "deepseek-reasoner")
_MARKER = re.compile(r"\[standin:([a-z_0-9]+)(?:=([0-9.]+))?\]")
_JOB_TYPE = re.compile(r"Job type:\s*([a-z_]+)")
_SCHEMA_TITLE = re.compile(r'"title":\s*"([a-z_]+) output')


@dataclass
class Fault:
    status: int | None = None
    delay: float = 0.0
    bad_json: bool = False
    invalid_output: bool = False
    drop: bool = False
    match: str | None = None
    times: int | None = 1  # None: every matching request

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Fault:
        return cls(
            status=int(body["status"]) if body.get("status") is not None else None,
            delay=float(body.get("delay") or 0),
            bad_json=bool(body.get("badJson")),
            invalid_output=bool(body.get("invalidOutput")),
            drop=bool(body.get("drop")),
            match=body.get("match"),
            times=body.get("times", 1),
        )

    @classmethod
    def from_markers(cls, text: str) -> Fault | None:
        found = _MARKER.findall(text)
        if not found:
            return None
        fault = cls(times=None)
        for name, value in found:
            if name.isdigit():
                fault.status = int(name)
            elif name == "delay":
                fault.delay = float(value or 1)
            elif name in ("bad_json", "invalid_output", "drop"):
                setattr(fault, name, True)
        return fault


@dataclass
class Answer:
    status: int
    body: dict[str, Any] | None  # None with drop: no answer at all
    delay: float = 0.0


class StandinModel:
    """The stand-in's behaviour, without HTTP (so it is testable directly)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._seen_prefixes: set[str] = set()
        self.stats: Counter[str] = Counter()

    # --- control --------------------------------------------------------------------------

    def add_faults(self, faults: list[dict[str, Any]]) -> None:
        with self._lock:
            self._faults.extend(Fault.from_wire(f) for f in faults)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def _take_fault(self, text: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.match is not None and fault.match not in text:
                    continue
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                return fault
        return Fault.from_markers(text)

    def served(self, usage: Any) -> None:
        """Count an answer sent: ``tokens`` in the stats, what a provider would charge."""
        if isinstance(usage, dict):
            with self._lock:
                self.stats["tokens"] += int(usage.get("total_tokens") or 0)
                self.stats["answers"] += 1

    def snapshot_stats(self) -> dict[str, Any]:
        with self._lock:
            return {"requests": sum(v for k, v in self.stats.items() if k.startswith("job:")), **self.stats}

    # --- the chat completion ----------------------------------------------------------------

    def complete(self, body: dict[str, Any]) -> Answer:
        messages = body.get("messages")
        model = body.get("model")
        if model not in MODELS:
            return _error(400, f"Model Not Exist: {model!r}", "invalid_request_error")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return _error(400, "messages must be a non-empty list", "invalid_request_error")
        texts = [str(m.get("content") or "") for m in messages]
        system = "\n".join(t for m, t in zip(messages, texts, strict=True) if m.get("role") == "system")
        user = "\n".join(t for m, t in zip(messages, texts, strict=True) if m.get("role") != "system")
        everything = system + "\n" + user
        json_mode = (body.get("response_format") or {}).get("type") == "json_object"
        if json_mode and "json" not in everything.lower():  # DeepSeek's own rule for JSON output
            return _error(
                400, "Prompt must contain the word 'json' to use response_format json_object", "invalid_request_error"
            )
        job_type = _job_type(user, system)
        with self._lock:
            self.stats[f"job:{job_type}"] += 1
        fault = self._take_fault(everything)
        delay = fault.delay if fault else 0.0
        if fault and fault.drop:
            return Answer(0, None, delay)
        if fault and fault.status and fault.status != 200:
            kind = "rate_limit_error" if fault.status == 429 else "server_error"
            return Answer(fault.status, _error(fault.status, f"stand-in fault {fault.status}", kind).body, delay)
        if fault and fault.bad_json:
            content = '{"summary": "this answer stops in the middle'
        elif fault and fault.invalid_output:
            content = json.dumps({"unexpected": True, "jobType": job_type})
        elif job_type == "unknown" and not json_mode:
            # A plain chat (a model-asynch task's payload, say): a plain answer that says what it is.
            content = f"This is the local stand-in model, not DeepSeek. You said: {user[-200:]}"
        else:
            output = build_output(job_type, _tagged_json(user, "snapshot"), _tagged_json(user, "params"))
            content = json.dumps(output, ensure_ascii=False)
        return Answer(200, self._completion(model, system, everything, content), delay)

    def _completion(self, model: str, system: str, prompt: str, content: str) -> dict[str, Any]:
        prompt_tokens, completion_tokens = _tokens(prompt), _tokens(content)
        # DeepSeek caches prompt prefixes in 64-token units: a system prompt seen
        # before is served from the cache.
        prefix = hashlib.sha256(system.encode()).hexdigest()
        with self._lock:
            seen = prefix in self._seen_prefixes
            if len(self._seen_prefixes) < 10_000:
                self._seen_prefixes.add(prefix)
        hit = (_tokens(system) // 64) * 64 if seen else 0
        return {
            "id": f"chatcmpl-standin-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": hit},
                "prompt_cache_hit_tokens": hit,
                "prompt_cache_miss_tokens": prompt_tokens - hit,
            },
            "system_fingerprint": "fp_standin",
        }


def _error(status: int, message: str, kind: str) -> Answer:
    return Answer(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def _job_type(user: str, system: str) -> str:
    found = _JOB_TYPE.search(user) or _SCHEMA_TITLE.search(system)
    return found.group(1) if found else "unknown"


def _tagged_json(text: str, tag: str) -> dict[str, Any]:
    start, end = text.find(f"<{tag}>"), text.find(f"</{tag}>")
    if start < 0 or end < start:
        return {}
    try:
        value = json.loads(text[start + len(tag) + 2 : end])
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
