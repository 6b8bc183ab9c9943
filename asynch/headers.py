"""The ``apiKey`` of a model config: request headers as ``Key:Value`` pairs,
comma-separated; booleans and numbers are sent as their text."""

from __future__ import annotations

import re

# RFC 9110 token characters: what a header name may be made of.
_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


class HeaderSyntaxError(ValueError):
    pass


def parse_api_key(value: str) -> dict[str, str]:
    """``"API_KEY:model-key,API_STATE:true"`` → ``{"API_KEY": "model-key", "API_STATE": "true"}``."""
    headers: dict[str, str] = {}
    for part in value.split(","):
        if not part.strip():
            continue
        name, sep, header_value = part.partition(":")
        name, header_value = name.strip(), header_value.strip()
        if not sep or not _NAME.match(name):
            raise HeaderSyntaxError(f"{part.strip()[:40]!r} is not a Key:Value pair with a valid header name")
        if any(c in header_value for c in "\r\n\x00"):
            raise HeaderSyntaxError(f"The value of {name} holds a line break")
        headers[name] = header_value
    return headers


def mask_value(value: str) -> str:
    # Long values keep their last four characters so an operator can tell keys apart.
    return "****" + value[-4:] if len(value) >= 12 else "****"


def mask_api_key(value: str) -> str:
    """Header names stay readable; every value is masked."""
    try:
        headers = parse_api_key(value)
    except HeaderSyntaxError:
        return "****" if value else ""
    return ",".join(f"{name}:{mask_value(header_value)}" for name, header_value in headers.items())
