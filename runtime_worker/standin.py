"""A local stand-in for DeepSeek's chat-completions API, for tests, benchmarks and
``make run`` without a key. It speaks the OpenAI-compatible wire format
(``POST /chat/completions``, ``GET /models``, also under ``/v1``), answers a job
prompt of ``templates/prompts`` with a schema-valid JSON output derived from the
snapshot in the prompt, and reports token usage with DeepSeek's cache split.

It can be told to fail, two ways:

- the control endpoint ``POST /_standin/faults`` with ``{"faults": [fault...]}``
  (``DELETE`` clears them, ``GET /_standin/stats`` counts requests). A fault is
  ``{"status": 429}`` (an error status), ``{"delay": 2.5}`` (seconds before
  answering), ``{"badJson": true}`` (content that is not JSON),
  ``{"invalidOutput": true}`` (JSON that misses the schema) or ``{"drop": true}``
  (close the connection unanswered), combinable, with ``"times"`` (how many
  requests it applies to, default 1, ``null`` for all) and ``"match"`` (apply
  only to prompts containing this text, e.g. a job's target id);
- a marker anywhere in the prompt, e.g. in a job's params: ``[standin:429]``,
  ``[standin:500]``, ``[standin:bad_json]``, ``[standin:invalid_output]``,
  ``[standin:drop]``, ``[standin:delay=2.5]``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import socket
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

logger = logging.getLogger(__name__)

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
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# --- outputs derived from the snapshot ----------------------------------------------------------


@dataclass
class _Topic:
    name: str
    knowledge_point_id: str | None
    correct: int = 0
    attempts: int = 0

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.attempts if self.attempts else None


def _clip(text: Any, most: int = 150) -> str:
    text = str(text).strip() or "untitled"
    return text if len(text) <= most else text[: most - 1] + "…"


def _walk(value: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(value, dict):
        found.append((path, value))
        for key, child in value.items():
            found.extend(_walk(child, f"{path}/{key}"))
    elif isinstance(value, list):
        for child in value:
            found.extend(_walk(child, path))
    return found


def _topics(snapshot: dict[str, Any]) -> tuple[list[_Topic], int, int]:
    """Named things in the snapshot (knowledge points first) with the learner's
    record on each (a point's ``mastery`` counts, else its study records), plus
    the overall correct and attempt counts."""
    nodes = _walk(snapshot)
    topics: dict[str, _Topic] = {}
    measured: set[str] = set()
    for path, node in nodes:
        name = node.get("name") or node.get("title")
        node_id = node.get("id")
        if not (name and node_id) or path in ("", "/learner", "/target"):
            continue
        is_point = ("knowledge" in path.lower() and "point" in path.lower()) or str(node_id).startswith("kp")
        topic = topics.setdefault(str(node_id), _Topic(_clip(name), str(node_id)[:64] if is_point else None))
        mastery = node.get("mastery")
        if isinstance(mastery, dict) and mastery.get("attemptCount") is not None:
            topic.attempts = _int(mastery.get("attemptCount"))
            topic.correct = _int(mastery.get("correctCount"))
            measured.add(str(node_id))
    correct = attempts = 0
    for _path, node in nodes:
        if "isCorrect" not in node:
            continue
        attempts += 1
        correct += bool(node.get("isCorrect"))
        point = node.get("knowledgePointId")
        if point is not None and str(point) not in measured:
            name = node.get("knowledgePointName") or f"knowledge point {point}"
            topic = topics.setdefault(str(point), _Topic(_clip(name), str(point)[:64]))
            topic.attempts += 1
            topic.correct += bool(node.get("isCorrect"))
    if measured:
        attempts = sum(t.attempts for t in topics.values())
        correct = sum(t.correct for t in topics.values())
    ordered = sorted(topics.values(), key=lambda t: (t.knowledge_point_id is None, t.name))
    if not ordered:
        target = snapshot.get("target") or {}
        ordered = [_Topic(_clip(f"{target.get('type', 'target')} {target.get('id', '')}".strip()), None)]
    return ordered, correct, attempts


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _level(score: float) -> str:
    return "beginner" if score < 40 else "developing" if score < 60 else "proficient" if score < 80 else "advanced"


def _count(params: dict[str, Any], key: str, default: int, most: int) -> int:
    try:
        return max(1, min(most, int(params.get(key, default))))
    except (TypeError, ValueError):
        return default


def build_output(job_type: str, snapshot: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    topics, correct, attempts = _topics(snapshot)
    learner = (snapshot.get("learner") or {}).get("username") or "The learner"
    by_weakness = sorted(topics, key=lambda t: (t.accuracy if t.accuracy is not None else 0.5, t.name))
    if job_type == "learning_state_analysis":
        score = round(100 * correct / attempts, 1) if attempts else 50.0
        strong = [t.name for t in topics if (t.accuracy or 0) >= 0.7]
        weak = [t.name for t in topics if t.accuracy is not None and t.accuracy < 0.7]
        summary = (
            f"{learner} answered {correct} of {attempts} attempts correctly across {len(topics)} topic(s)."
            if attempts
            else f"{learner} has no study records for this target yet; the estimate is a neutral starting point."
        )
        return {
            "summary": summary,
            "masteryScore": score,
            "level": _level(score),
            "strengths": strong[:10],
            "weaknesses": weak[:10],
            "confidence": round(min(0.95, 0.3 + attempts / 50), 2),
        }
    if job_type == "weak_point_analysis":
        points = []
        for topic in by_weakness[:5]:
            accuracy = topic.accuracy
            severity = (
                "high"
                if accuracy is not None and accuracy < 0.4
                else "medium"
                if accuracy is not None and accuracy < 0.7
                else "low"
            )
            evidence = [f"{topic.correct} of {topic.attempts} correct"] if topic.attempts else ["no attempts recorded"]
            points.append(
                {
                    "knowledgePointId": topic.knowledge_point_id,
                    "title": topic.name,
                    "reason": f"Accuracy on {topic.name} is {accuracy:.0%}."
                    if accuracy is not None
                    else f"{topic.name} has not been practised yet.",
                    "severity": severity,
                    "evidence": evidence,
                    "confidence": round(min(0.9, 0.3 + topic.attempts / 20), 2),
                }
            )
        return {"weakPoints": points}
    if job_type == "next_action_planning":
        plans = [("review", 15), ("practice", 20), ("quiz", 10)]
        recommendations = []
        for index, (topic, (action, minutes)) in enumerate(zip(by_weakness * 3, plans, strict=False)):
            recommendation: dict[str, Any] = {
                "actionType": action,
                "title": _clip(f"{action.replace('_', ' ').capitalize()}: {topic.name}", 200),
                "description": f"Spend {minutes} minutes to {action} {topic.name}.",
                "priority": index + 1,
                "estimatedMinutes": minutes,
            }
            if topic.knowledge_point_id:
                recommendation.update(targetType="knowledge_point", targetId=topic.knowledge_point_id)
            recommendations.append(recommendation)
        return {"recommendations": recommendations}
    if job_type == "quiz_generation":
        questions = []
        for index in range(_count(params, "questionCount", 10, 50)):
            topic = topics[index % len(topics)]
            kind = ("single_choice", "true_false", "multiple_choice", "short_answer")[index % 4]
            question: dict[str, Any] = {
                "questionType": kind,
                "stem": f"Question {index + 1}: what is the key idea of {topic.name}?",
                "options": [],
                "answer": f"The key idea of {topic.name}",
                "explanation": f"Derived from the study material on {topic.name}.",
                "difficulty": ("easy", "medium", "hard")[index % 3],
                "knowledgePointId": topic.knowledge_point_id,
            }
            if kind == "single_choice":
                question.update(options=[f"The key idea of {topic.name}", "Something unrelated"])
            elif kind == "true_false":
                question.update(
                    stem=f"Question {index + 1}: {topic.name} is part of this knowledge base. True or false?",
                    options=["True", "False"],
                    answer="True",
                )
            elif kind == "multiple_choice":
                question.update(
                    options=[f"A fact about {topic.name}", f"Another fact about {topic.name}", "An unrelated claim"],
                    answer=[f"A fact about {topic.name}", f"Another fact about {topic.name}"],
                )
            questions.append(question)
        return {"questions": questions}
    if job_type == "flashcard_generation":
        cards = []
        for index in range(_count(params, "cardCount", 20, 100)):
            topic = topics[index % len(topics)]
            cards.append(
                {
                    "front": f"{topic.name} (card {index + 1})",
                    "back": f"The essentials of {topic.name}, as the material explains them.",
                    "hint": f"Think of {topic.name}.",
                    "knowledgePointId": topic.knowledge_point_id,
                    "tags": ["standin"],
                }
            )
        return {"flashcards": cards}
    return {"answer": f"The stand-in has no output for job type {job_type!r}."}


# --- HTTP ---------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StandinServer

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("stand-in: " + format, *args)

    def _send(self, status: int, body: dict[str, Any] | None) -> None:
        data = json.dumps(body or {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    def _authorized(self) -> bool:
        scheme, _, key = (self.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() == "bearer" and key.strip():
            return True
        self._send(
            401, {"error": {"message": "Authentication Fails (no such API key)", "type": "authentication_error"}}
        )
        return False

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/models", "/v1/models"):
            if self._authorized():
                self._send(
                    200,
                    {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "deepseek"} for m in MODELS]},
                )
        elif path == "/_standin/stats":
            self._send(200, self.server.model.snapshot_stats())
        elif path in ("", "/health"):
            self._send(200, {"ok": True, "standin": True})
        else:
            self._send(404, {"error": {"message": "Not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            body = self._body()
        except ValueError:
            self._send(400, {"error": {"message": "Invalid JSON body", "type": "invalid_request_error"}})
            return
        if path == "/_standin/faults":
            if not isinstance(body, dict) or not isinstance(body.get("faults", []), list):
                self._send(400, {"error": {"message": 'Expected {"faults": [...]}', "type": "invalid_request_error"}})
                return
            if body.get("replace"):
                self.server.model.clear_faults()
            self.server.model.add_faults(list(body.get("faults") or []))
            self._send(200, {"ok": True})
            return
        if path not in ("/chat/completions", "/v1/chat/completions"):
            self._send(404, {"error": {"message": "Not found", "type": "invalid_request_error"}})
            return
        if not self._authorized():
            return
        answer = self.server.model.complete(body if isinstance(body, dict) else {})
        if answer.delay:
            time.sleep(answer.delay)
        if answer.body is None:  # drop: no answer at all
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._send(answer.status, answer.body)

    def do_DELETE(self) -> None:
        if self.path.rstrip("/") == "/_standin/faults":
            self.server.model.clear_faults()
            self._send(200, {"ok": True})
        else:
            self._send(404, {"error": {"message": "Not found", "type": "invalid_request_error"}})


class StandinServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), _Handler)
        self.model = StandinModel()
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> StandinServer:
        self._thread = threading.Thread(target=self.serve_forever, name="standin-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
