"""A local stand-in for DeepSeek's chat-completions API, for tests, benchmarks and
``make run`` without a key: ``model`` (the completion and its faults), ``answers``
(each job type's answer, derived from the snapshot), ``server`` (HTTP). It speaks the OpenAI-compatible wire format
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

from runtime_worker.standin.answers import build_output
from runtime_worker.standin.model import MODELS, Answer, Fault, StandinModel
from runtime_worker.standin.server import StandinServer

__all__ = ["MODELS", "Answer", "Fault", "StandinModel", "StandinServer", "build_output"]
