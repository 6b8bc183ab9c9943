"""The runtime's client of the internal HTTP API (``/internal/runtime``), and nothing
more: the runtime is a client of the server, so no model and no service of the
server is imported here."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from runtime_worker.redact import redact


def wire_cents(cents: Decimal) -> float:
    """``costCents`` as the API documents it, a JSON number. A cost has 4 decimal places,
    so the number's shortest form (what JSON writes) is the decimal itself."""
    return float(cents)


class ApiUnavailable(Exception):
    """The API could not answer: connection refused or reset, a timeout, a 5xx, or
    a 429 throttle. Worth retrying; says nothing about the job. ``status`` is the
    HTTP status when there was one: 503 is the server saying its database or Redis
    is down for now, so the call is worth retrying until it is back."""

    def __init__(self, message: str, *, retry_after: float | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status

    @property
    def service_unavailable(self) -> bool:
        return self.status == 503


class ApiError(Exception):
    """The API answered with one of its error codes: a definite answer."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message

    @property
    def job_gone(self) -> bool:
        """The lease is lost or the job is no longer this runtime's to finish."""
        return self.code in {"JOB_NOT_ACTIVE", "JOB_NOT_FOUND", "RESULT_ALREADY_EXISTS"}


@dataclass
class Job:
    """A claimed job, as the claim call returns it (camelCase fields read once)."""

    job_id: str
    job_type: str
    target_type: str
    target_id: str
    attempt_no: int
    timeout_seconds: int
    prompt_version: str | None
    output_schema_version: str | None
    model_name: str
    model_provider: str
    lock_until_ms: int | None
    params: dict[str, Any] = field(default_factory=dict)
    status: str = "locked"
    # The claim fast path (``include``): what the snapshot and credential calls would give.
    snapshot: dict[str, Any] | None = None
    credential: Credential | None = field(default=None, repr=False)

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Job:
        snapshot, credential = body.get("snapshot"), body.get("credential")
        return cls(
            job_id=body["jobId"],
            job_type=body["jobType"],
            target_type=body.get("targetType") or "",
            target_id=body.get("targetId") or "",
            attempt_no=int(body["attemptNo"]),
            timeout_seconds=int(body.get("timeoutSeconds") or 120),
            prompt_version=body.get("promptVersion"),
            output_schema_version=body.get("outputSchemaVersion"),
            model_name=body.get("modelName") or "deepseek-chat",
            model_provider=body.get("modelProvider") or "deepseek",
            lock_until_ms=body.get("lockUntil"),
            params=body.get("params") or {},
            status=str(body.get("status") or "locked"),
            snapshot=snapshot if isinstance(snapshot, dict) else None,
            credential=Credential.from_wire(credential) if isinstance(credential, dict) else None,
        )


@dataclass(frozen=True)
class Credential:
    api_key_mode: str
    provider: str
    base_url: str
    model_name: str
    api_key: str

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Credential:
        return cls(
            api_key_mode=str(body.get("apiKeyMode", "")),
            provider=str(body.get("provider", "deepseek")),
            base_url=str(body.get("baseUrl", "")),
            model_name=str(body.get("modelName", "")),
            api_key=str(body.get("apiKey", "")),
        )

    def __repr__(self) -> str:  # a repr never shows the key
        return f"Credential({self.api_key_mode}, {self.provider}, {self.base_url}, {self.model_name}, ****)"


@dataclass(frozen=True)
class Beat:
    lock_until_ms: int
    cancel_requested: bool


class InternalApi:
    """One instance per runtime, shared by its threads (a session per thread)."""

    def __init__(
        self, base_url: str, token: str, instance_id: str, *, timeout: float = 15.0, include: Sequence[str] = ()
    ) -> None:
        self.base_url = base_url.rstrip("/") + "/internal/runtime"
        # Claim's fast path (``include``): each job comes running, with these already in hand.
        self.include = tuple(include)
        self.instance_id = instance_id
        self.timeout = timeout
        self._headers = {
            "Authorization": f"Bearer {token}",
            "x-runtime-instance-id": instance_id,
            "Accept": "application/json",
        }
        self._local = threading.local()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.mount("http://", HTTPAdapter(pool_connections=1, pool_maxsize=4))
            session.mount("https://", HTTPAdapter(pool_connections=1, pool_maxsize=4))
            session.headers.update(self._headers)
            self._local.session = session
        return session

    def close(self) -> None:
        session = getattr(self._local, "session", None)
        if session is not None:
            session.close()
            self._local.session = None

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            response = self._session().request(
                method, f"{self.base_url}/{path}", json=body if method != "GET" else None, timeout=self.timeout
            )
        except requests.RequestException as error:
            raise ApiUnavailable(f"{type(error).__name__}: {redact(str(error))}") from None
        if response.status_code >= 500 or response.status_code == 429:
            retry_after = response.headers.get("Retry-After")
            raise ApiUnavailable(
                f"HTTP {response.status_code} from {path}",
                retry_after=float(retry_after) if retry_after and retry_after.isdigit() else None,
                status=response.status_code,
            )
        try:
            payload = response.json() if response.content else {}
        except (ValueError, RecursionError):
            payload = {}
        if response.status_code >= 400:
            error = payload.get("error") if isinstance(payload, dict) else None
            error = error if isinstance(error, dict) else {}
            raise ApiError(
                response.status_code,
                str(error.get("code") or f"HTTP_{response.status_code}"),
                redact(str(error.get("message") or response.reason)),
            )
        return payload if isinstance(payload, dict) else {}

    # --- the calls of the internal API ------------------------------------------------

    def claim(self, capabilities: list[str], limit: int, *, claim_id: str | None = None) -> list[Job]:
        """``claim_id``: unique per claim, and the same when the claim is sent again
        because its answer did not come: the server then answers the jobs it took."""
        request: dict[str, Any] = {"capabilities": capabilities, "limit": limit}
        if claim_id is not None:
            request["claimId"] = claim_id
        if self.include:
            request["include"] = list(self.include)
        body = self._call("POST", "jobs/claim", request)
        return [Job.from_wire(job) for job in body.get("jobs", [])]

    def heartbeat(self, job_id: str) -> Beat:
        body = self._call("POST", f"jobs/{job_id}/heartbeat", {})
        return Beat(lock_until_ms=int(body.get("lockUntil") or 0), cancel_requested=bool(body.get("cancelRequested")))

    def snapshot(self, job_id: str) -> dict[str, Any]:
        return self._call("GET", f"jobs/{job_id}/snapshot")

    def credential(self, job_id: str) -> Credential:
        return Credential.from_wire(self._call("POST", f"jobs/{job_id}/credential", {}))

    def result(
        self,
        job_id: str,
        *,
        attempt_no: int,
        output_schema_version: str,
        output: dict[str, Any],
        usage: dict[str, int],
        cost_cents: Decimal,
        invocation_logs: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "attemptNo": attempt_no,
            "outputSchemaVersion": output_schema_version,
            "output": output,
            "usage": usage,
            "costCents": wire_cents(cost_cents),
        }
        if invocation_logs:
            body["invocationLogs"] = invocation_logs
        return self._call("POST", f"jobs/{job_id}/result", body)

    def fail(self, job_id: str, *, attempt_no: int, error_code: str, error_message: str) -> dict[str, Any]:
        return self._call(
            "POST",
            f"jobs/{job_id}/fail",
            {"attemptNo": attempt_no, "errorCode": error_code, "errorMessage": redact(error_message)[:4000]},
        )

    def invocation_logs(self, job_id: str, logs: list[dict[str, Any]]) -> dict[str, Any]:
        return self._call("POST", f"jobs/{job_id}/invocation-logs", {"logs": logs})
