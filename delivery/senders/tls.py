"""What the push connections trust: ``PUSH_CA_FILE`` when it is set (a private
gateway, a test's stand-in), instead of the system's bundle and of any bundle the
environment names (``SSL_CERT_FILE``, ``REQUESTS_CA_BUNDLE``); else the system's."""

from __future__ import annotations

import os
import ssl
import threading
from typing import Any

import httpx
import requests
from django.conf import settings


def ssl_context() -> ssl.SSLContext:
    ca_file = settings.PUSH_CA_FILE
    return ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()


def requests_session() -> requests.Session:
    """A session for the OAuth token endpoint: the environment's bundle and proxies
    are not read (``trust_env``)."""
    session = requests.Session()
    session.trust_env = False
    session.verify = settings.PUSH_CA_FILE or True
    return session


class Http2Client:
    """One HTTP/2 client per process for the endpoint that ``endpoint_setting`` names
    (and per trust and timeout), made lazily: a forked worker makes its own, and a
    changed setting a new one."""

    def __init__(self, endpoint_setting: str) -> None:
        self._endpoint_setting = endpoint_setting
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._made_for: tuple[Any, ...] = ()

    def get(self) -> httpx.Client:
        wanted = (
            os.getpid(), getattr(settings, self._endpoint_setting), settings.PUSH_CA_FILE, settings.PUSH_TIMEOUT_SECONDS
        )  # fmt: skip
        with self._lock:
            if self._client is None or self._made_for != wanted:
                if self._client is not None and self._made_for[0] == wanted[0]:
                    self._client.close()
                self._client = httpx.Client(
                    http2=True, verify=ssl_context(), trust_env=False, timeout=settings.PUSH_TIMEOUT_SECONDS,
                    follow_redirects=False,
                )  # fmt: skip
                self._made_for = wanted
            return self._client
