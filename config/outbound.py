"""The one reading of an outbound URL: where the platform may send a request that a
caller configured (a model config's ``baseUrl``, a webhook endpoint's ``url``), checked
when the URL is saved and again as each connection opens (contract section 10, DESIGN
rules 11 and 12). Everything that sends to a caller's URL goes through this module.

The API, for any caller (``allow_list`` is the *name* of the setting that lists the
hosts allowed past the address rules: ``ASYNCH_ALLOWED_MODEL_HOSTS`` for model configs,
``WEBHOOK_ALLOWED_HOSTS`` for webhook endpoints):

``read(url) -> Target``
    The URL as the platform reads it (scheme, host, port), or ``OutboundRefused`` whose
    message says what is wrong. Refused: a backslash, whitespace, a control or format
    character anywhere; userinfo (``user@``); a zone id or any ``%`` in the host; a
    host that is not plain ASCII (write it in punycode), has a trailing dot, or is
    a number that some parsers read as an address and others as a name
    (``2130706433``, ``0x7f.1``, ``127.1``, ``0177.0.0.1``: an IPv4 address is four
    decimal numbers); a fragment; a scheme other than http/https; a port outside
    1-65535; anything urllib3 (the library that connects) reads as another scheme, host
    or port than this reading does. Needs no network, raises nothing else.

``problem(url, allow_list) -> str | None``
    What is wrong with ``url`` as a configured URL, or None: ``read``'s problems, then
    the address rules. A host listed in the allow-list is allowed (any scheme, any
    address). Any other must be ``https://`` and must not resolve to a loopback,
    link-local (cloud metadata), private, unspecified (``0.0.0.0``, ``::``), multicast
    or reserved address. A name that does not resolve now is accepted: each connection
    checks it again. The answer is meant for a ``400 VALIDATION_ERROR`` on the field.

``origin(url) -> tuple[str, str, int] | None``
    Scheme, host and port (the scheme's default when none is written): what a stored
    secret is bound to. None for a URL ``read`` refuses.

``session(allow_list) -> requests.Session``
    A session for sending to configured URLs. Each request's URL is read again with
    ``read``, as given and as prepared (the very string urllib3 connects by), and the
    two readings must name one scheme, host and port; each connection
    resolves its host once, checks every address under the rules above and connects
    to those addresses only, so a name that resolves to a public address when saved
    and a private one when called (DNS rebinding) is never connected to. It follows no
    redirect whatever the caller passes (a ``3xx`` is the answer), takes no proxy from
    the environment (a proxy would resolve the host itself, past the check) and
    verifies TLS certificates against the host's name (a CA bundle named by
    ``REQUESTS_CA_BUNDLE`` still counts). A refused request raises
    ``OutboundRefused`` before anything is sent; its message names the setting, never
    a host or an address, so it can become an error the caller reads.

A host is listed only as the allow-list writes it: a listed name does not list the
addresses it resolves to, nor a listed address the names that resolve to it. Names
compare without case, addresses in their canonical form (``[0:0::1]`` is ``::1``)."""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import socket
import sys
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, LocationParseError, NameResolutionError, NewConnectionError
from urllib3.util import parse_url
from urllib3.util.connection import allowed_gai_family, create_connection

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_URL_LENGTH = 2048
_DEFAULT_PORTS = {"http": 80, "https": 443}
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_DECIMAL = re.compile(r"^(?:0|[1-9][0-9]{0,2})$")
# A last label that a WHATWG parser reads as a number (so the host as an IPv4 address).
_NUMERIC = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")


class OutboundRefused(Exception):
    """A URL the platform does not read, or a connection it does not open. The message
    says why without naming the host or its addresses."""


@dataclass(frozen=True)
class Target:
    """A URL as the platform reads it: the host is lower case, without brackets."""

    url: str
    scheme: str
    host: str
    port: int

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port


def _characters_problem(url: str) -> str | None:
    if "\\" in url:
        return "A URL without a backslash."
    for char in url:
        if char.isspace():
            return "A URL without whitespace."
        if unicodedata.category(char) in ("Cc", "Cf"):
            return "A URL without control characters."
    return None


def _host_problem(host: str) -> str | None:
    """A host name or IPv4 address as written between ``//`` and the port."""
    if not host:
        return "A URL with a host."
    if not host.isascii():
        return "A host name in ASCII (punycode for an international name)."
    if host.endswith("."):
        return "A host name without a trailing dot."
    labels = host.split(".")
    if _NUMERIC.match(labels[-1]):
        if len(labels) != 4 or not all(_DECIMAL.match(label) and int(label) <= 255 for label in labels):
            return "An IPv4 address written as four decimal numbers from 0 to 255."
        return None
    if len(host) > 253 or not all(_LABEL.match(label) for label in labels):
        return "A host name of letters, digits, hyphens and dots."
    return None


def read(url: str) -> Target:
    """The one reading of ``url`` (see the module's docstring); OutboundRefused if none."""
    if not isinstance(url, str) or not url:
        raise OutboundRefused("A URL.")
    if len(url) > MAX_URL_LENGTH:
        raise OutboundRefused(f"A URL of at most {MAX_URL_LENGTH} characters.")
    problem = _characters_problem(url)
    if problem:
        raise OutboundRefused(problem)
    scheme, sep, rest = url.partition(":")
    scheme = scheme.lower()
    if not sep or scheme not in _DEFAULT_PORTS or not rest.startswith("//"):
        raise OutboundRefused("An http:// or https:// URL.")
    authority = re.split(r"[/?#]", rest[2:], maxsplit=1)[0]
    if "@" in authority:
        raise OutboundRefused("A URL without userinfo (user@ or user:password@).")
    if "%" in authority:
        raise OutboundRefused("A host without a zone id or percent-encoding.")
    if "#" in url:
        raise OutboundRefused("A URL without a fragment (#).")
    authority = authority.lower()
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise OutboundRefused("An IPv6 address closed by ].")
        host, port_part = authority[1:end], authority[end + 1 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise OutboundRefused("A valid IPv6 address between [ and ].") from None
    else:
        host, colon, port = authority.partition(":")
        port_part = colon + port
        problem = _host_problem(host)
        if problem:
            raise OutboundRefused(problem)
    if port_part:
        digits = port_part[1:]
        if not port_part.startswith(":") or not digits.isdigit() or not digits.isascii() or len(digits) > 5:
            raise OutboundRefused("A port from 1 to 65535.")
        port = int(digits)
        if not 1 <= port <= 65535:
            raise OutboundRefused("A port from 1 to 65535.")
    else:
        port = _DEFAULT_PORTS[scheme]
    target = Target(url=url, scheme=scheme, host=host, port=port)
    # The library that connects must read the same scheme, host and port.
    try:
        theirs = parse_url(url)
        split = urlsplit(url)
        split_port = split.port
    except (LocationParseError, ValueError):
        raise OutboundRefused("A URL that every parser reads alike.") from None
    readings = {
        ((theirs.scheme or "").lower(), (theirs.host or "").lower().strip("[]"), theirs.port or _DEFAULT_PORTS[scheme]),
        (split.scheme.lower(), split.hostname or "", split_port or _DEFAULT_PORTS[scheme]),
    }
    if readings != {target.origin}:
        raise OutboundRefused("A URL that every parser reads as the same host.")
    return target


def origin(url: str) -> tuple[str, str, int] | None:
    try:
        target = read(url)
    except OutboundRefused:
        return None
    return target.scheme, _normalize(target.host), target.port


def _normalize(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        return host


def _listed_hosts(allow_list: str) -> set[str]:
    value: Any = getattr(settings, allow_list, ())
    entries: Iterable[str] = value.split(",") if isinstance(value, str) else value
    return {_normalize(entry) for entry in entries if entry.strip()}


def is_listed(host: str, allow_list: str) -> bool:
    return _normalize(host) in _listed_hosts(allow_list)


def address_kind(address: str | IPAddress) -> str | None:
    """Why the platform does not connect to this address unless its host is listed, or
    None for a public one. An IPv4 address inside IPv6 (mapped, 6to4, NAT64) counts as itself."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = (
            ip.ipv4_mapped or ip.sixtofour or (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None)
        )
        if embedded is not None:
            return address_kind(embedded)
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"  # 169.254.169.254, cloud metadata, is one
    if ip.is_unspecified:
        return "the unspecified address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_private:
        return "a private address"
    if ip.is_reserved or not ip.is_global or (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local):
        return "a reserved address"
    return None


def _resolve(host: str, port: int) -> list[tuple]:
    return socket.getaddrinfo(host, port, allowed_gai_family(), socket.SOCK_STREAM)


def problem(url: str, allow_list: str) -> str | None:
    """What is wrong with ``url`` as a configured URL under these rules, or None."""
    try:
        target = read(url)
    except OutboundRefused as refused:
        return str(refused)
    if is_listed(target.host, allow_list):
        return None
    if target.scheme != "https":
        return f"An https:// URL, or a host listed in {allow_list}."
    try:
        found = _resolve(target.host, target.port)
    except (socket.gaierror, UnicodeError):
        return None
    for *_, sockaddr in found:
        kind = address_kind(sockaddr[0])
        if kind:
            host = _normalize(target.host)
            what = (
                f"is {kind}" if sockaddr[0] == host else f"resolves to {kind}"
            )  # never which: no probe of private DNS
            return f"{host} {what}: it may be named only when {allow_list} lists it."
    return None


def _checked(host: str, port: int, *, tls: bool, allow_list: str) -> list[tuple]:
    """The addresses a connection may use for ``host``; OutboundRefused when none may."""
    if is_listed(host, allow_list):
        return _resolve(host, port)
    if not tls:
        raise OutboundRefused(f"its URL is plain http:// and its host is not listed in {allow_list}")
    found = _resolve(host, port)
    for *_, sockaddr in found:
        kind = address_kind(sockaddr[0])
        if kind:
            raise OutboundRefused(f"its host resolves to {kind}, which only {allow_list} may allow")
    return found


class _CheckedConnection:
    """Opens its socket to an address just checked (urllib3's own ``_new_conn`` would
    resolve the name again, where the answer may have changed)."""

    host: str
    port: int
    timeout: float | None
    source_address: tuple[str, int] | None
    socket_options: list | None
    checks_tls: bool
    allow_list: str

    def _new_conn(self) -> socket.socket:
        try:
            found = _checked(self.host, self.port, tls=self.checks_tls, allow_list=self.allow_list)
        except socket.gaierror as error:
            raise NameResolutionError(self.host, self, error) from error  # type: ignore[arg-type]
        last: OSError | None = None
        for *_, sockaddr in found:
            try:
                sock = create_connection(
                    (sockaddr[0], self.port),
                    self.timeout,
                    source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except TimeoutError as error:
                raise ConnectTimeoutError(
                    self, f"Connection to {self.host} timed out. (connect timeout={self.timeout})"
                ) from error
            except OSError as error:
                last = error
                continue
            sys.audit("http.client.connect", self, self.host, self.port)
            return sock
        raise NewConnectionError(self, f"Failed to establish a new connection: {last}")  # type: ignore[arg-type]


@functools.cache
def _pool_classes(allow_list: str) -> dict[str, type]:
    """urllib3 pool classes whose connections check under ``allow_list``."""
    http = type(
        "CheckedHTTPConnection", (_CheckedConnection, HTTPConnection), {"checks_tls": False, "allow_list": allow_list}
    )
    # TLS still verifies the certificate against the host's name.
    https = type(
        "CheckedHTTPSConnection", (_CheckedConnection, HTTPSConnection), {"checks_tls": True, "allow_list": allow_list}
    )
    return {
        "http": type("CheckedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": http}),
        "https": type("CheckedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": https}),
    }


class _CheckedAdapter(HTTPAdapter):
    def __init__(self, allow_list: str) -> None:
        self.allow_list = allow_list
        super().__init__(max_retries=0)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _pool_classes(self.allow_list)

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        # Read again as prepared: the very string urllib3 picks its pool (so its host) by.
        read(request.url or "")
        return super().send(request, *args, **kwargs)


class _OutboundSession(requests.Session):
    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        # The URL as given is the one read: requests' preparation would quote a
        # backslash into the path, say, and hide which host another parser saw.
        target = read(url.decode() if isinstance(url, bytes) else url)
        prepared = requests.PreparedRequest()
        prepared.prepare_url(target.url, kwargs.get("params"))
        if read(prepared.url or "").origin != target.origin:
            raise OutboundRefused("A URL that every parser reads as the same host.")
        kwargs["allow_redirects"] = False
        return super().request(method, url, *args, **kwargs)

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        kwargs["allow_redirects"] = False
        return super().send(request, **kwargs)


def session(allow_list: str) -> requests.Session:
    """A session for configured URLs under ``allow_list``'s rules (module docstring)."""
    outbound = _OutboundSession()
    outbound.trust_env = False
    outbound.verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
    adapter = _CheckedAdapter(allow_list)
    outbound.mount("http://", adapter)
    outbound.mount("https://", adapter)
    return outbound
