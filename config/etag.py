"""Cheap polling (contract 11.4): a strong ``ETag`` over what a ``GET`` answers, and
``304 Not Modified`` with no body to a request whose ``If-None-Match`` names it.

The tag is a digest of the answer's data in canonical JSON (sorted keys, no spaces),
so it changes whenever anything the answer says changes, and two processes give the
same tag for the same answer."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

IF_NONE_MATCH = OpenApiParameter(
    "If-None-Match",
    str,
    OpenApiParameter.HEADER,
    description="The ETag of an earlier answer: 304 Not Modified, with no body, while it is still the current one",
)
NOT_MODIFIED = OpenApiResponse(description="Not Modified: the If-None-Match tag is still the current one; no body")


def etag_of(data: Any) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return '"' + hashlib.sha256(canonical.encode()).hexdigest()[:32] + '"'


def _names(header: str, tag: str) -> bool:
    # A list of entity tags; If-None-Match compares weakly (RFC 9110 13.1.2), so W/ is ignored.
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == tag:
            return True
    return False


def conditional(request: Request, response: Response) -> Response:
    """The response with its ``ETag``, or ``304`` when the request already holds it."""
    if response.status_code != status.HTTP_200_OK:
        return response
    tag = etag_of(response.data)
    header = request.headers.get("If-None-Match", "")
    if header and _names(header[:4096], tag):
        not_modified = Response(status=status.HTTP_304_NOT_MODIFIED)
        not_modified["ETag"] = tag
        return not_modified
    response["ETag"] = tag
    return response
