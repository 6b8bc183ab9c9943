"""Where model-asynch sends a model's request: a config's ``baseUrl`` is ``https://`` to
a public address, or names a host listed in ``ASYNCH_ALLOWED_MODEL_HOSTS``. A host that
resolves to a loopback, link-local (cloud metadata), private or otherwise non-public
address is refused when the config is set (``base_url_problem``) and again when the
worker connects (``model_session``).

The worker's check runs inside the connection itself: the addresses it checks are the
ones it connects to, resolved once, so a name that resolves to a public address for the
check and to a private one for the call (DNS rebinding) is never called."""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from urllib.parse import urlsplit

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util.connection import allowed_gai_family, create_connection

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

SETTING = "ASYNCH_ALLOWED_MODEL_HOSTS"
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class EgressRefused(Exception):
    """A connection the worker does not open. The message names no host or address: it
    becomes the task's error, which the tenant reads."""


def normalize_host(host: str) -> str:
    """A host as the rules compare it: lower case, no brackets nor trailing dot, an
    address in its canonical form (``[0:0::1]`` is ``::1``)."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        return host


def is_listed(host: str) -> bool:
    return normalize_host(host) in {normalize_host(h) for h in settings.ASYNCH_ALLOWED_MODEL_HOSTS if h.strip()}


def address_kind(address: str | IPAddress) -> str | None:
    """Why the platform does not call this address unless its host is listed, or None
    for a public one. An IPv4 address inside IPv6 (mapped, 6to4, NAT64) counts as itself."""
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


def origin(url: str) -> tuple[str, str, int | None]:
    """Scheme, host and port (the scheme's default when none is written): what a
    config's stored key is bound to."""
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    scheme = parts.scheme.lower()
    return scheme, normalize_host(parts.hostname or ""), port or {"http": 80, "https": 443}.get(scheme)


def base_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as a config's ``baseUrl`` under these rules, or None.
    A name that does not resolve now is accepted: the worker checks it again before each call."""
    parts = urlsplit(url.strip())
    host = normalize_host(parts.hostname or "")
    if not host:
        return "A URL with a host."
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "The port is not a number from 0 to 65535."
    if is_listed(host):
        return None
    if parts.scheme != "https":
        return f"An https:// URL, or a host listed in {SETTING}."
    try:
        found = _resolve(host, port)
    except socket.gaierror:
        return None
    except UnicodeError:
        return "Not a valid host name."
    for *_, sockaddr in found:
        kind = address_kind(sockaddr[0])
        if kind:
            what = f"is {kind}" if sockaddr[0] == host else f"resolves to {kind} ({sockaddr[0]})"
            return f"{host} {what}: a model config may name it only when {SETTING} lists it."
    return None


def _checked(host: str, port: int, *, tls: bool) -> list[tuple]:
    """The addresses the worker may connect to for ``host``; EgressRefused when none may."""
    if is_listed(host):
        return _resolve(host, port)
    if not tls:
        raise EgressRefused(f"its URL is plain http:// and its host is not listed in {SETTING}")
    found = _resolve(host, port)
    for *_, sockaddr in found:
        kind = address_kind(sockaddr[0])
        if kind:
            raise EgressRefused(f"its host resolves to {kind}, which only {SETTING} may allow")
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

    def _new_conn(self) -> socket.socket:
        try:
            found = _checked(self.host, self.port, tls=self.checks_tls)
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


class _CheckedHTTPConnection(_CheckedConnection, HTTPConnection):
    checks_tls = False


class _CheckedHTTPSConnection(_CheckedConnection, HTTPSConnection):
    checks_tls = True  # TLS still verifies the certificate against the host's name


class _CheckedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _CheckedHTTPConnection


class _CheckedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _CheckedHTTPSConnection


class _CheckedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _CheckedHTTPPool, "https": _CheckedHTTPSPool}


def model_session() -> requests.Session:
    """A session for model calls: every connection it opens is checked. It connects
    straight to the model's host: a proxy from the environment (``HTTPS_PROXY``) would
    resolve the host itself, past the check. A CA bundle named there still counts."""
    session = requests.Session()
    session.trust_env = False
    session.verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
    adapter = _CheckedAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
