"""What each field of the API's bodies means, for the schema (``describe_fields``, a
drf-spectacular post-processing hook): a field that says nothing of itself (no
``help_text``) takes its description from here, by its wire name, or by its component
and name where one name means different things.

A new field either has its ``help_text`` or a line here; tests/test_schema_reference.py
walks the schema and names any field that has neither. A field that is a reference to a
component (an enum, a nested object) is described by that component: ``COMPONENTS``."""

from __future__ import annotations

from typing import Any

FIELDS: dict[str, str] = {
    # ids and times
    "id": "The object's opaque id.",
    "jobId": "The job's opaque id (`job_…`).",
    "userId": "The user's opaque id (`usr_…`).",
    "taskId": "The task's id.",
    "taskIds": "The ids of the tasks to pick up (at most the batch's limit).",
    "resultId": "The stored result's id.",
    "snapshotId": "The snapshot's id.",
    "requestId": "The model provider's request id, when it gave one.",
    "tenantId": "The tenant the counts are of.",
    "knowledgeBaseId": "The knowledge base it belongs to.",
    "knowledgePointId": "The knowledge point it concerns.",
    "credentialId": "The user's model credential a `user_deepseek_key` job runs with; null with `platform_key`.",
    "retriedFromJobId": "The job this one retries, when it is a retry.",
    "createdAt": "When it was created (ISO 8601, UTC).",
    "updatedAt": "When it last changed (ISO 8601, UTC).",
    "startedAt": "When it started (ISO 8601, UTC).",
    "finishedAt": "When it finished (ISO 8601, UTC); null until then.",
    "expiresAt": "When it expires (ISO 8601, UTC).",
    "readAt": "When the user marked it read; null while unread.",
    "studiedAt": "When the learner studied (ISO 8601, UTC).",
    "lastTestedAt": "When the credential was last tested; null if never.",
    "lockUntil": "When the current lock lapses, in epoch milliseconds; null when unlocked.",
    "localDate": "Today's date in the user's timezone: the day their quotas count.",
    "timezone": "The user's IANA timezone (`Asia/Shanghai`): their day starts at its midnight.",
    # a job
    "jobType": "What the job produces: one of the registered job types.",
    "targetType": "What the job is about: the user, a knowledge base, a knowledge point.",
    "targetId": "The target's id; `me` names the caller for `targetType: user`.",
    "apiKeyMode": "Whose model key the job runs with: the platform's, or the learner's own credential.",
    "idempotencyKey": "The client's key for this request: the same key again returns the job it made, "
    "never a second one.",
    "priority": "The job's priority, 0 the highest.",
    "params": "The job type's parameters (its count parameter among them).",
    "questionCount": "quiz_generation: how many questions (also accepted inside `params`).",
    "cardCount": "flashcard_generation: how many cards (also accepted inside `params`).",
    "status": "Where the job is in its life.",
    "attemptNo": "Which attempt this is, from 1.",
    "retryCount": "How many times it has been retried.",
    "maxRetryCount": "How many retries it may have.",
    "timeoutSeconds": "How long one run (or one model call) may take, in seconds.",
    "modelProvider": "The model provider the job runs against.",
    "modelName": "The model's name.",
    "promptVersion": "The prompt's version the runtime used; null until a result.",
    "outputSchemaVersion": "The version of the output's schema.",
    "errorCode": "Why it failed (a runtime's code, or the server's); null unless failed.",
    "errorMessage": "What went wrong, for people; null unless failed.",
    "cancelRequested": "The job's cancel was requested: a runtime stops at its next check.",
    "jobs": "The jobs handed out.",
    "snapshot": "The learning snapshot the job runs on.",
    "credential": "The credential to call the model with (only for the lock holder).",
    "output": "The job's output, in its type's schema.",
    "usage": "Tokens and cost used.",
    "invocationLogs": "The model calls the attempt made, logged with the result.",
    "logs": "The model calls to log.",
    "duplicate": "The same result was posted again: nothing changed.",
    "accepted": "How many were accepted.",
    # tokens and accounts
    "access": "A JWT access token: `Authorization: Bearer <access>`.",
    "refresh": "A JWT refresh token, for `POST /auth/token/refresh` (it rotates).",
    "username": "The account's username.",
    "password": "The account's password.",
    "email": "The account's email address (optional).",
    "oldPassword": "The current password.",
    "newPassword": "The new password (Django's password validators apply).",
    # quotas and settings
    "aiAnalysisEnabled": "The learner's consent to AI analysis: no job is created while it is off.",
    "defaultApiKeyMode": "The key mode a job gets when it names none.",
    "maxDailyAiJobs": "Jobs the learner may create a day.",
    "maxDailyTokenBudget": "Tokens the learner may use a day.",
    "jobCount": "Jobs created today.",
    "jobsRemaining": "Jobs the learner may still create today.",
    "tokensUsed": "Tokens used today.",
    "tokensRemaining": "Tokens the learner may still use today.",
    "costCents": "The cost, in cents (fractions kept).",
    "promptTokens": "Tokens of the prompt.",
    "completionTokens": "Tokens of the answer.",
    "totalTokens": "Tokens in all.",
    "platform_key": "Today's use with the platform's key.",
    "user_deepseek_key": "Today's use with the learner's own key.",
    "circuit": "The platform key's circuit breaker, as a client needs it.",
    "platformKeyAvailable": "Whether a platform-key job may be created now.",
    # model calls
    "provider": "The model provider.",
    "httpStatus": "The HTTP status the model answered with.",
    "latencyMs": "How long the call took, in milliseconds.",
    "apiKey": "The key (write only; answers show it masked).",
    "baseUrl": "The model service's base URL.",
    "ok": "Whether the test call succeeded.",
    "lastTestResult": "The last test call's outcome; null if never tested.",
    # learning
    "name": "Its name.",
    "description": "Its description.",
    "title": "Its title.",
    "content": "Its text.",
    "isCorrect": "Whether the learner answered correctly.",
    "score": "The learner's score, 0 to 100.",
    "durationSeconds": "How long the learner studied, in seconds.",
    "goals": "The learner's goals.",
    "level": "The learner's level.",
    "preferredStudyTime": "When the learner prefers to study.",
    "preferences": "The learner's other preferences (free-form).",
    # outputs
    "summary": "The analysis in a few sentences.",
    "masteryScore": "How well the learner masters the target, 0 to 100.",
    "strengths": "What the learner does well.",
    "weaknesses": "What the learner should work on.",
    "confidence": "How sure the model is, 0 to 1.",
    "evidence": "What the finding rests on.",
    "reason": "Why it is a weak point.",
    "severity": "How serious it is.",
    "stem": "The question.",
    "options": "The answers to choose from (for a choice question).",
    "answer": "The right answer.",
    "explanation": "Why the answer is right.",
    "difficulty": "How hard the question is.",
    "questionType": "The kind of question.",
    "front": "The card's front.",
    "back": "The card's back.",
    "hint": "A hint.",
    "tags": "Its tags.",
    "actionType": "What kind of action is recommended.",
    "actionTargetId": "What the action is about, when it names one.",
    "estimatedMinutes": "How long it should take, in minutes.",
    "kind": "What the notice is about.",
    "message": "What it says, for people.",
    "isRead": "Whether the user marked it read.",
    # model-asynch
    "route": "The path appended to `baseUrl`.",
    "httpMethod": "The HTTP method of the model call (GET or POST).",
    "enabled": "1 enabled, 0 disabled.",
    "maxConcurrency": "The most calls at once per tenant and model.",
    "queueLimit": "The most queued tasks; past it `createTask` answers QUEUE_LIMIT_EXCEEDED.",
    "retryTimes": "Retries after a failed call (not counting the first).",
    "retryQueueMaxSeconds": "0: a retry goes to the queue's head; more: to its tail, ahead of the queue only "
    "after waiting so long.",
    "autoCleanSeconds": "How long a picked-up task (state 4) is kept, in seconds.",
    "remark": "A note for people.",
    "bizName": "The business service's name for the call.",
    "creator": "Who made the task (a user id), when the caller says.",
    "requestPayload": "The body sent to the model service, as it is.",
    "state": "The task's state: 0 queued, 1 running, 2 succeeded, 3 failed, 4 picked up.",
    "ossFile": "The signed, expiring URL of the stored result; null until it succeeded.",
    "requestCount": "How many tasks were created.",
    "deleted": "Whether it was deleted.",
    # webhooks
    "endpointId": "The webhook endpoint's opaque id (`ep_…`).",
    "deliveryId": "The delivery's opaque id: one event sent to one endpoint.",
    "eventId": "The event's id: the `webhook-id` header, the same on every try and every endpoint.",
    "eventType": "The event: `task.succeeded` or `task.failed`.",
    "events": "The events the endpoint takes: a subset of `task.succeeded` and `task.failed` (default both).",
    "url": "Where the platform posts the events: `https://`, or a host listed in WEBHOOK_ALLOWED_HOSTS; "
    "never a private, loopback or link-local address otherwise.",
    "attempts": "How many tries were made.",
    "lastStatusCode": "The HTTP status of the last try; null when it got none (refused, timed out, unreachable).",
    "lastError": "What went wrong on the last try (`refused: …`, `HTTP 500`); names no address.",
    "nextAttemptAt": "When the next try is due (ISO 8601, UTC); null when no try is left.",
    "deliveredAt": "When a receiver accepted it with a 2xx (ISO 8601, UTC); null until then.",
    # envelopes
    "results": "This page's items.",
    "next": "The cursor of the next page (`?cursor=`), null on the last.",
    "error": "The error: its code, a message for people, whether retrying may help.",
    "schemaVersion": "The snapshot's schema version.",
    "data": "The snapshot's document.",
}

# Where one wire name means something else in one component.
BY_COMPONENT: dict[tuple[str, str], str] = {
    ("Circuit", "state"): "The breaker's state: closed, open or half-open.",
    ("Circuit", "message"): "What the breaker's state means for the learner's jobs.",
    ("HealthStatus", "status"): "`ok` while the process answers.",
    ("Readiness", "status"): "`ok` when every backing service answers, else `unavailable`.",
    ("ResultOut", "status"): "The job's status after the result (`succeeded`).",
    ("Lock", "status"): "The job's status after the lock (`locked`).",
    ("Delivery", "status"): "pending (tries left), delivered (a 2xx came back) or failed (no try left).",
    ("Endpoint", "enabled"): "Whether events are sent to it; an endpoint that failed every delivery for "
    "WEBHOOK_DISABLE_AFTER_DAYS is turned off.",
    ("EndpointCreated", "enabled"): "Whether events are sent to it (a new endpoint is on).",
    ("EndpointUpdateInRequest", "enabled"): "true turns a disabled endpoint back on; false stops sending to it.",
    ("Endpoint", "description"): "The tenant's note about the endpoint.",
    ("EndpointCreated", "description"): "The tenant's note about the endpoint.",
    ("Recommendation", "priority"): "How soon to do it, 1 first.",
    ("Recommendation", "description"): "What to do, in a sentence or two.",
    ("InvocationLogRequest", "startedAt"): "When the call started (ISO 8601, UTC).",
    ("InvocationLogRequest", "modelName"): "The model called.",
    ("InvocationLogRequest", "errorCode"): "Why the call failed; null when it succeeded.",
    ("FailInRequest", "errorCode"): "Why the attempt failed: one of the runtime's codes.",
    ("FailInRequest", "errorMessage"): "What went wrong, for people.",
    ("Notification", "title"): "The notice's title, for people.",
    ("Notification", "message"): "The notice's text, for people.",
    ("TaskResult", "errorMessage"): "Why the task failed; null unless it did.",
    ("TaskResult", "finishedAt"): "When the task finished; null until then.",
    ("TaskResult", "retryCount"): "How many times the call was retried.",
    ("TaskCreateInRequest", "creator"): "Who makes the task, when `X-User-Info` does not say.",
    ("Stat", "modelName"): "The model the counts are of.",
    ("Stat", "creator"): "The creator the counts are of.",
    ("Credential", "apiKey"): "The key, in clear: this answer goes to the lock holder only.",
    ("AiProfile", "usage"): "Today's use, by key mode.",
    ("ResultInRequest", "usage"): "Tokens and cost the attempt used.",
    ("ModelListItem", "modelName"): "The model's name, as `createTask` takes it.",
}

# A component a field refers to describes the field: an object or an enum says what it is.
COMPONENTS: dict[str, str] = {
    "Error": "The contract's error body.",
    "EnabledEnum": "1 enabled, 0 disabled.",
    "NullEnum": "Null.",
    "ModelCredentialStatusEnum": "The credential's state.",
    "ResultOutStatusEnum": "The job's status after the result.",
    "ModelCredentialLastTest": "The last test call of a credential.",
    "ModelCredentialTest": "A test call of a credential.",
    "Usage": "Tokens and cost used, and what is left of the day.",
    "UsageByMode": "Today's use, by key mode.",
    "UsageRequest": "Tokens and cost used.",
    "Circuit": "The platform key's circuit breaker, as a client needs it.",
    "Snapshot": "The learning snapshot a job runs on.",
    "Credential": "The credential a runtime calls the model with.",
    "InvocationLogRequest": "One model call.",
    "ClaimedJob": "A job handed to a runtime, locked for it.",
    "Job": "A job, as a runtime sees it.",
    "UserJob": "A job, as its learner sees it.",
    "BatchItem": "One task of a batch.",
}


# The parameters of a path, a query or a header that say nothing of themselves, by name.
PARAMETERS: dict[str, str] = {
    "device_id": "The device's id (`dev_…`).",
    "endpointId": "Only the deliveries to this endpoint.",
    "status": "Only the deliveries in this status: pending, delivered or failed.",
    "job_id": "The job's id (`job_…`).",
    "credential_id": "The id of one of the caller's model credentials.",
    "notification_id": "The id of one of the caller's notices.",
    "object_id": "The id of one of the caller's objects of this kind.",
    "token": "The signed, expiring token of the download URL (`ossFile`).",
    "x-runtime-instance-id": "Which runtime instance calls: the lock holder's name, the same on every call.",
    "modelName": "The model config's name.",
    "taskId": "The task's id.",
}


def _described(schema: dict[str, Any], node: dict[str, Any]) -> bool:
    if node.get("description"):
        return True
    ref = node.get("$ref")
    if ref is None and len(node.get("allOf", [])) == 1:
        ref = node["allOf"][0].get("$ref")
    if ref is None:
        return False
    return bool(schema["components"]["schemas"].get(ref.rsplit("/", 1)[1], {}).get("description"))


def describe_fields(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular's POSTPROCESSING_HOOKS: the descriptions of this module, where the code gave none."""
    components = result.get("components", {}).get("schemas", {})
    for name, text in COMPONENTS.items():
        if name in components and not components[name].get("description"):
            components[name]["description"] = text
    for item in result.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if not parameter.get("description") and parameter["name"] in PARAMETERS:
                    parameter["description"] = PARAMETERS[parameter["name"]]
    for name, component in components.items():
        base = name.removeprefix("Patched").removesuffix("Request")
        for key, field in component.get("properties", {}).items():
            if _described(result, field) or "$ref" in field:  # a bare reference: its component says
                continue
            text = BY_COMPONENT.get((name, key)) or BY_COMPONENT.get((base, key)) or FIELDS.get(key)
            if text:
                field["description"] = text
    return result
