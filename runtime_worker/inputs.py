"""What an attempt fetches before the model call: the snapshot of the learner's data
and the credential for the model, each checked before it is used. A job claimed on
the fast path (``include``) arrives with both, and nothing is fetched."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from protocol.errors import RuntimeErrorCode
from runtime_worker.api import ApiError, ApiUnavailable, Credential
from runtime_worker.attempt import Abandon, Attempt, Stop
from runtime_worker.backoff import Backoff
from runtime_worker.redact import register_secret

T = TypeVar("T")
SNAPSHOT_VERSIONS = {"v1"}


def fetch(run: Attempt, what: str, fn: Callable[[], T], *, attempts: int | None) -> T:
    """Call the API, retrying while it is unreachable (bounded by ``attempts`` and by
    the attempt's checkpoint); a lost lease abandons the job. A 503 does not use up
    ``attempts``: the server says its database is down for now, not that the call
    fails, so the job waits for it (up to its deadline) instead of failing."""
    backoff = Backoff()
    tries = 0
    while True:
        try:
            return fn()
        except ApiUnavailable as error:
            if not error.service_unavailable:
                tries += 1
            if attempts is not None and tries >= attempts:
                raise
            run.log.debug("job %s: %s not fetched (%s); retrying", run.job.job_id, what, error)
            run.wake.wait(backoff.next(error.retry_after))
            run.wake.clear()
            run.checkpoint()
        except ApiError as error:
            if error.job_gone:
                raise Abandon(f"{what}: {error.code}", code=error.code) from None
            raise


def snapshot(run: Attempt) -> dict[str, Any]:
    job = run.job
    body = job.snapshot
    if body is None:
        try:
            body = fetch(run, "snapshot", lambda: run.api.snapshot(job.job_id), attempts=4)
        except (ApiUnavailable, ApiError) as error:
            raise Stop(RuntimeErrorCode.SNAPSHOT_FETCH_FAILED, f"Snapshot not fetched: {error}") from None
    version = body.get("schemaVersion")
    if version not in SNAPSHOT_VERSIONS:
        raise Stop(
            RuntimeErrorCode.INVALID_SNAPSHOT,
            f"Snapshot schemaVersion {version!r} is not one this runtime reads ({', '.join(sorted(SNAPSHOT_VERSIONS))})",
        )
    if not isinstance(body.get("data"), dict):
        raise Stop(RuntimeErrorCode.INVALID_SNAPSHOT, "Snapshot has no data object")
    for key, expected in (("targetType", job.target_type), ("targetId", job.target_id)):
        if body.get(key) not in (None, expected):
            raise Stop(RuntimeErrorCode.INVALID_SNAPSHOT, f"Snapshot {key} {body.get(key)!r} is not the job's")
    return body


def credential(run: Attempt) -> Credential:
    resolved = run.job.credential
    if resolved is None:
        try:
            resolved = fetch(run, "credential", lambda: run.api.credential(run.job.job_id), attempts=None)
        except ApiError as error:
            raise Stop(RuntimeErrorCode.CREDENTIAL_RESOLVE_FAILED, f"Credential not resolved: {error}") from None
    if not resolved.api_key or not resolved.base_url:
        raise Stop(RuntimeErrorCode.CREDENTIAL_RESOLVE_FAILED, "The resolved credential has no key or base URL")
    register_secret(resolved.api_key)
    return resolved
