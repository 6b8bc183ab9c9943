"""Shared fixtures of the credential tests (modules import the ``*_fixture``
functions): encryption keys, a JWT client per user, and a local provider that
answers ``GET /models`` as told."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import LazySettings
from rest_framework.test import APIClient

from accounts.api.tokens import AccessToken
from credentials import services
from credentials.models import Credential

KEY_1 = base64.b64encode(b"\x01" * 32).decode()
KEY_2 = base64.b64encode(b"\x02" * 32).decode()
API_KEY = "sk-test0000000000000000000000abcd"


class Provider:
    """A stand-in for DeepSeek on 127.0.0.1: answers ``status`` (after ``delay``
    seconds) and records every Authorization header and path it receives."""

    def __init__(self) -> None:
        self.status = 200
        self.delay = 0.0
        self.seen: list[tuple[str, str]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                provider.seen.append((self.path, self.headers.get("Authorization", "")))
                if provider.delay:
                    threading.Event().wait(provider.delay)
                body = b'{"object": "list", "data": [{"id": "deepseek-chat"}]}'
                self.send_response(provider.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def reset(self) -> None:
        self.status, self.delay, self.seen = 200, 0.0, []

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session", name="provider_server")
def provider_server_fixture() -> Iterator[Provider]:
    server = Provider()
    yield server
    server.stop()


@pytest.fixture(name="provider")
def provider_fixture(provider_server: Provider, settings: LazySettings) -> Provider:
    provider_server.reset()
    settings.DEEPSEEK_BASE_URL = provider_server.url
    return provider_server


@pytest.fixture(name="encryption_keys")
def encryption_keys_fixture(settings: LazySettings) -> LazySettings:
    settings.CREDENTIAL_ENCRYPTION_KEYS = [f"k1:{KEY_1}"]
    settings.CREDENTIAL_TEST_TIMEOUT_SECONDS = 2.0
    return settings


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {AccessToken.for_user(user)}")
    return client


def make_credential(user, api_key: str = API_KEY, name: str = "My key") -> Credential:
    return services.credential_create(user=user, name=name, api_key=api_key)


def url(credential_id: str | None = None, action: str = "") -> str:
    path = "/ai/model-credentials"
    if credential_id is not None:
        path += f"/{credential_id}"
    return path + (f"/{action}" if action else "")
