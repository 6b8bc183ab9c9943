"""What the push connections trust: ``PUSH_CA_FILE`` when it is set (a private
gateway, a test's stand-in), instead of the system's bundle and of any bundle the
environment names (``SSL_CERT_FILE``, ``REQUESTS_CA_BUNDLE``); else the system's."""

from __future__ import annotations

import ssl

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
