"""The internal runtime API. Thin: parse, call one service, render."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder
from rest_framework.views import APIView

from ai_jobs import selectors, services
from ai_jobs.api import internal_serializers as s
from ai_jobs.api.authentication import INSTANCE_HEADER, IsRuntime, RuntimeAuthentication, instance_id_of
from config.errors import ErrorCode
from config.openapi import raises
from quotas.throttles import RuntimeThrottle

INSTANCE = OpenApiParameter(INSTANCE_HEADER, str, OpenApiParameter.HEADER, required=True)
INSTANCE_OPTIONAL = OpenApiParameter(INSTANCE_HEADER, str, OpenApiParameter.HEADER, required=False)


def _valid(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    return s.parse(serializer_class, request.data)


class InternalView(APIView):
    authentication_classes = [RuntimeAuthentication]
    permission_classes = [IsRuntime]
    throttle_classes = [RuntimeThrottle]
    is_heartbeat = False

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        # An authenticated runtime called: the dashboard and aijobs_runtimes_active know it is alive.
        instance_id = request.headers.get(INSTANCE_HEADER, "").strip()
        if instance_id and len(instance_id) <= 128:
            services.runtime_seen(instance_id=instance_id, heartbeat=self.is_heartbeat)


@extend_schema(
    tags=["internal runtime"], request=s.PollSerializer, responses=s.JobsSerializer, parameters=[INSTANCE_OPTIONAL]
)
class PollView(InternalView):
    """See the pending jobs a runtime could claim, without claiming them.

    `capabilities` names the job types the runtime runs; nothing is locked, so another
    runtime may claim what this one saw."""

    def post(self, request: Request) -> Response:
        data = _valid(s.PollSerializer, request)
        jobs = selectors.pending_jobs(job_types=data["capabilities"], limit=data["limit"], now=timezone.now())
        return Response(s.jobs_body(jobs))


@extend_schema(
    tags=["internal runtime"], request=s.ClaimSerializer, responses=s.ClaimedJobsSerializer, parameters=[INSTANCE]
)
class ClaimView(InternalView):
    """Claim pending jobs: each handed-out job is locked for this runtime instance.

    Jobs of the `capabilities` types, by priority then age, at most `limit`; another runtime
    never gets the same job. `include` asks for each job's snapshot and credential in the same
    answer (the fast path); without it the runtime fetches them with the calls below."""

    def post(self, request: Request) -> HttpResponseBase:
        instance_id = instance_id_of(request)
        data = _valid(s.ClaimSerializer, request)
        include, claim_id = set(data.get("include") or ()), data.get("claimId")
        if not include:
            jobs = services.job_claim(
                job_types=data["capabilities"], limit=data["limit"], instance_id=instance_id, claim_id=claim_id
            )
            return Response(s.jobs_body(jobs))
        started = services.job_claim_started(
            job_types=data["capabilities"],
            limit=data["limit"],
            instance_id=instance_id,
            snapshot="snapshot" in include,
            credential="credential" in include,
            claim_id=claim_id,
        )
        response = _json_text('{"jobs":[' + ",".join(_started_text(job) for job in started) + "]}")
        if "credential" in include:
            response["Cache-Control"] = "no-store"
        return response


def _json_text(text: str) -> HttpResponse:
    """A JSON body already serialized (a snapshot's stored text inside): sent as it is."""
    return HttpResponse(text.encode(), content_type="application/json")


def _started_text(started: services.StartedJob) -> str:
    """A claimed job's body with its snapshot text spliced in, never decoded."""
    body = s.render(s.JobSerializer, started.job)
    if started.credential is not None:
        body["credential"] = s.render(s.CredentialSerializer, started.credential)
    text = json.dumps(body, cls=JSONEncoder, ensure_ascii=False, separators=(",", ":"))
    return text if started.snapshot is None else text[:-1] + ',"snapshot":' + started.snapshot + "}"


@extend_schema(tags=["internal runtime"], request=s.EmptySerializer, responses=s.LockSerializer, parameters=[INSTANCE])
class LockView(InternalView):
    """Lock one pending job for this runtime instance (the seed's path: poll, then lock).

    The answer carries the attempt number and `lockUntil` (epoch milliseconds); keep the lock
    with heartbeats."""

    @raises(ErrorCode.JOB_NOT_FOUND, ErrorCode.JOB_NOT_ACTIVE, ErrorCode.JOB_ALREADY_LOCKED)
    def post(self, request: Request, job_id: str) -> Response:
        job = services.job_lock(job_id=job_id, instance_id=instance_id_of(request))
        return Response(s.render(s.LockSerializer, job))


@extend_schema(
    tags=["internal runtime"], request=s.EmptySerializer, responses=s.HeartbeatSerializer, parameters=[INSTANCE]
)
class HeartbeatView(InternalView):
    """Extend the lock on a job this instance holds, and learn whether its cancel was requested.

    `cancelRequested: true` tells the runtime to stop at its next check and report
    `JOB_CANCELLED` through `fail`."""

    is_heartbeat = True

    @raises(ErrorCode.JOB_NOT_FOUND, ErrorCode.JOB_NOT_ACTIVE)
    def post(self, request: Request, job_id: str) -> Response:
        beat = services.job_heartbeat(job_id=job_id, instance_id=instance_id_of(request))
        return Response(
            {
                "jobId": job_id,
                "lockUntil": int(beat.lock_until.timestamp() * 1000),
                "cancelRequested": beat.cancel_requested,
            }
        )


@extend_schema(tags=["internal runtime"], responses=s.SnapshotSerializer, parameters=[INSTANCE])
class SnapshotView(InternalView):
    """Read the learning snapshot a locked job runs on (built when the job is locked or rebuilt
    when it has expired)."""

    @raises(ErrorCode.JOB_NOT_FOUND, ErrorCode.JOB_NOT_ACTIVE)
    def get(self, request: Request, job_id: str) -> HttpResponse:
        return _json_text(services.job_snapshot(job_id=job_id, instance_id=instance_id_of(request)))


@extend_schema(
    tags=["internal runtime"], request=s.EmptySerializer, responses=s.CredentialSerializer, parameters=[INSTANCE]
)
class CredentialView(InternalView):
    """Resolve the model key a locked job runs with: the platform's, or the learner's own,
    decrypted for the lock holder only (the answer is never cached)."""

    @raises(
        ErrorCode.JOB_NOT_FOUND,
        ErrorCode.JOB_NOT_ACTIVE,
        ErrorCode.CREDENTIAL_NOT_FOUND,
        ErrorCode.CREDENTIAL_REQUIRED,
        ErrorCode.CREDENTIAL_RESOLVE_FAILED,
    )
    def post(self, request: Request, job_id: str) -> Response:
        credential = services.job_credential(job_id=job_id, instance_id=instance_id_of(request))
        response = Response(s.render(s.CredentialSerializer, credential))
        response["Cache-Control"] = "no-store"
        return response


@extend_schema(
    tags=["internal runtime"], request=s.ResultInSerializer, responses=s.ResultOutSerializer, parameters=[INSTANCE]
)
class ResultView(InternalView):
    """Hand back a locked job's output: the job succeeds and its output becomes the learner's
    records.

    The output must match its type's schema (`outputSchemaVersion`). The same result posted
    again is harmless (`duplicate: true`); a different one for a job that already succeeded
    is refused."""

    @raises(
        ErrorCode.JOB_NOT_FOUND,
        ErrorCode.JOB_NOT_ACTIVE,
        ErrorCode.RESULT_ALREADY_EXISTS,
        ErrorCode.RESULT_SCHEMA_UNSUPPORTED,
    )
    def post(self, request: Request, job_id: str) -> Response:
        instance_id = instance_id_of(request)
        data = _valid(s.ResultInSerializer, request)
        submitted = services.result_submit(
            job_id=job_id,
            instance_id=instance_id,
            attempt_no=data["attemptNo"],
            output_schema_version=data.get("outputSchemaVersion"),
            output=data["output"],
            usage=data.get("usage") or {},
            cost_cents=data["costCents"],
            invocation_logs=data.get("invocationLogs"),
        )
        return Response(s.render(s.ResultOutSerializer, submitted))


@extend_schema(
    tags=["internal runtime"], request=s.FailInSerializer, responses=s.FailOutSerializer, parameters=[INSTANCE]
)
class FailView(InternalView):
    """Report that an attempt failed, with one of the runtime's error codes.

    A retryable code puts the job back to `pending` while retries remain; any other ends it
    `failed` (or `cancelled` for `JOB_CANCELLED`)."""

    @raises(ErrorCode.JOB_NOT_FOUND, ErrorCode.JOB_NOT_ACTIVE)
    def post(self, request: Request, job_id: str) -> Response:
        instance_id = instance_id_of(request)
        data = _valid(s.FailInSerializer, request)
        outcome = services.job_fail(
            job_id=job_id,
            instance_id=instance_id,
            attempt_no=data["attemptNo"],
            error_code=data["errorCode"],
            error_message=data["errorMessage"],
        )
        return Response(s.render(s.FailOutSerializer, outcome))


@extend_schema(
    tags=["internal runtime"],
    request=s.InvocationLogsInSerializer,
    responses={201: s.AcceptedSerializer},
    parameters=[INSTANCE],
)
class InvocationLogsView(InternalView):
    """Log model calls an attempt made (tokens, latency, status), apart from a result."""

    @raises(ErrorCode.JOB_NOT_FOUND)
    def post(self, request: Request, job_id: str) -> Response:
        instance_id = instance_id_of(request)
        data = _valid(s.InvocationLogsInSerializer, request)
        accepted = services.invocation_logs_record(job_id=job_id, instance_id=instance_id, logs=data["logs"])
        return Response({"accepted": accepted}, status=status.HTTP_201_CREATED)
