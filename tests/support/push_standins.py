"""Local servers standing in for Apple's and Google's push services, each checking
every request as the real one would (contract 11.2), and the keys and certificate
they need, made by the test with ``cryptography``.

- ``ApnsStandin``: HTTP/2 over TLS (the ``h2`` package on an ``ssl`` socket, ALPN
  ``h2``), ``POST /3/device/{token}``: the provider token's ES256 signature checked
  with the team key's public half, its ``kid`` and ``iss``; every header and field.
- ``GoogleStandin``: HTTPS, the OAuth token endpoint of a service account file
  (``POST /token``: the JWT bearer grant's RS256 assertion checked with the account's
  public key, its ``kid``, ``iss``, ``aud``, ``scope``) and FCM HTTP v1's
  ``POST /v1/projects/{project}/messages:send`` (the bearer must be a token it issued).

Both are trusted through ``PUSH_CA_FILE`` (``ca.pem``). A request that breaks a rule
is answered as the service would (``400``/``401``/``403``) and its problem is kept
in ``problems``, which a test asserts empty. ``answers[token]`` scripts what the next
pushes to a device token get (status, headers, JSON body); by default ``200``.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import socket
import ssl
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import h2.config
import h2.connection
import h2.events
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
TEAM_ID = "TEAM123456"
KEY_ID = "KEYID12345"
TOPIC = "com.example.learning"
PROJECT_ID = "learning-push-test"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
# The audience Google's token endpoint takes in an assertion, whatever the URL it was posted to.
GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"


@dataclass
class Certificates:
    ca_file: Path
    cert_file: Path
    key_file: Path

    def server_context(self, alpn: list[str]) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        context.set_alpn_protocols(alpn)
        return context


def make_certificates(directory: Path) -> Certificates:
    """A CA of the test's own and a certificate it signed for 127.0.0.1 and localhost."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "push test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    made = Certificates(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    made.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    made.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    made.key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return made


def make_apns_key(directory: Path) -> tuple[Path, ec.EllipticCurvePublicKey]:
    """A team's ``.p8`` signing key (P-256, PKCS#8 PEM, as Apple hands it out)."""
    key = ec.generate_private_key(ec.SECP256R1())
    path = directory / f"AuthKey_{KEY_ID}.p8"
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return path, key.public_key()


def make_service_account(directory: Path, token_uri: str) -> tuple[Path, rsa.RSAPublicKey, dict[str, str]]:
    """A service account file as Google's console writes it, whose token_uri is ours."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    info = {
        "type": "service_account",
        "project_id": PROJECT_ID,
        "private_key_id": uuid.uuid4().hex,
        "private_key": key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode(),
        "client_email": f"push@{PROJECT_ID}.iam.gserviceaccount.com",
        "client_id": "1234567890",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_uri,
    }
    path = directory / "service-account.json"
    path.write_text(json.dumps(info))
    return path, key.public_key(), info


@dataclass
class Received:
    """One request as the stand-in saw it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    status: int
    at: float  # time.monotonic()


@dataclass
class _Answers:
    answers: dict[str, list[tuple[int, dict[str, str], dict[str, Any]]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    received: list[Received] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_answer(self, token: str) -> tuple[int, dict[str, str], dict[str, Any]] | None:
        with self.lock:
            queue = self.answers.get(token)
            return queue.pop(0) if queue else None

    def to(self, token: str) -> list[Received]:
        with self.lock:
            return [
                r for r in self.received if r.path.endswith(token) or r.body.get("message", {}).get("token") == token
            ]

    def reset(self) -> None:
        with self.lock:
            self.answers.clear()
            self.received.clear()
            self.problems.clear()


# --- APNs ----------------------------------------------------------------------------------------------


class ApnsStandin(_Answers):
    def __init__(self, certificates: Certificates, public_key: ec.EllipticCurvePublicKey, ttl: int) -> None:
        super().__init__()
        self.public_key = public_key
        self.ttl = ttl
        self.context = certificates.server_context(["h2"])
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.provider_tokens: list[str] = []
        self.refuse_provider_tokens: set[str] = set()
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._stop = True
        self.listener.close()

    def reset(self) -> None:
        super().reset()
        with self.lock:
            self.provider_tokens.clear()
            self.refuse_provider_tokens.clear()

    def _accept(self) -> None:
        while not self._stop:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            conn = self.context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError) as error:
            self.problems.append(f"TLS handshake failed: {error}")
            raw.close()
            return
        if conn.selected_alpn_protocol() != "h2":
            self.problems.append(f"not HTTP/2 (ALPN {conn.selected_alpn_protocol()!r})")
            conn.close()
            return
        h2conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        h2conn.initiate_connection()
        conn.sendall(h2conn.data_to_send())
        streams: dict[int, tuple[dict[str, str], bytearray]] = {}
        try:
            while True:
                data = conn.recv(65535)
                if not data:
                    break
                for event in h2conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        streams[event.stream_id] = (dict(event.headers), bytearray())
                    elif isinstance(event, h2.events.DataReceived):
                        streams[event.stream_id][1].extend(event.data)
                        h2conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    elif isinstance(event, h2.events.StreamEnded):
                        headers, body = streams.pop(event.stream_id)
                        status, extra, answer = self._answer(headers, bytes(body))
                        content = json.dumps(answer).encode() if answer else b""
                        h2conn.send_headers(
                            event.stream_id,
                            [(":status", str(status)), ("apns-id", str(uuid.uuid4())), *extra.items(),
                             ("content-length", str(len(content)))],
                            end_stream=not content,
                        )  # fmt: skip
                        if content:
                            h2conn.send_data(event.stream_id, content, end_stream=True)
                    elif isinstance(event, h2.events.ConnectionTerminated):
                        return
                conn.sendall(h2conn.data_to_send())
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()

    def _answer(self, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
        problems: list[str] = []
        path = headers.get(":path", "")
        token = path.removeprefix("/3/device/")
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
            problems.append("the body is not JSON")
        status, extra, answer = self._check(headers, path, token, body, problems)
        with self.lock:
            self.received.append(Received(path, headers, body, status, time.monotonic()))
            self.problems.extend(f"APNs {token[-6:]}: {p}" for p in problems)
        return status, extra, answer

    def _check(
        self, headers: dict[str, str], path: str, token: str, body: dict[str, Any], problems: list[str]
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        if headers.get(":method") != "POST" or not path.startswith("/3/device/") or not token:
            problems.append(f"{headers.get(':method')} {path}")
            return 404, {}, {"reason": "BadPath"}
        bearer = headers.get("authorization", "")
        if not bearer.startswith("bearer "):
            problems.append("no bearer provider token")
            return 403, {}, {"reason": "MissingProviderToken"}
        provider_token = bearer.removeprefix("bearer ")
        try:
            header = jwt.get_unverified_header(provider_token)
            claims = jwt.decode(
                provider_token, self.public_key, algorithms=["ES256"], options={"require": ["iat", "iss"]}
            )
        except jwt.PyJWTError as error:
            problems.append(f"provider token refused: {error}")
            return 403, {}, {"reason": "InvalidProviderToken"}
        if header.get("kid") != KEY_ID or header.get("alg") != "ES256" or claims.get("iss") != TEAM_ID:
            problems.append(f"provider token's kid/alg/iss: {header} {claims}")
            return 403, {}, {"reason": "InvalidProviderToken"}
        if not time.time() - 3600 <= claims["iat"] <= time.time() + 60:
            return 403, {}, {"reason": "ExpiredProviderToken"}
        with self.lock:
            if provider_token not in self.provider_tokens:
                self.provider_tokens.append(provider_token)
            if provider_token in self.refuse_provider_tokens:
                return 403, {}, {"reason": "ExpiredProviderToken"}
        expected = {"apns-topic": TOPIC, "apns-push-type": "alert", "apns-priority": "10"}
        for name, value in expected.items():
            if headers.get(name) != value:
                problems.append(f"{name} is {headers.get(name)!r}, not {value!r}")
        collapse = headers.get("apns-collapse-id", "")
        if not collapse or len(collapse.encode()) > 64 or collapse != body.get("jobId"):
            problems.append(f"apns-collapse-id {collapse!r} is not the jobId")
        expiration = headers.get("apns-expiration", "")
        if not expiration.isdigit() or abs(int(expiration) - (time.time() + self.ttl)) > 120:
            problems.append(f"apns-expiration {expiration!r} is not now + {self.ttl}s")
        aps = body.get("aps", {})
        alert = aps.get("alert", {})
        if set(body) != {"aps", "jobId", "notificationId", "jobType", "status"}:
            problems.append(f"body keys {sorted(body)}")
        if set(aps) != {"alert", "badge", "sound", "thread-id"} or aps.get("sound") != "default":
            problems.append(f"aps {aps}")
        if not isinstance(aps.get("badge"), int) or aps.get("thread-id") != body.get("jobType"):
            problems.append(f"badge/thread-id {aps}")
        if set(alert) != {"title", "body"} or not all(isinstance(v, str) and v for v in alert.values()):
            problems.append(f"alert {alert}")
        if len(json.dumps(body).encode()) > 4096:
            return 413, {}, {"reason": "PayloadTooLarge"}
        if problems:
            return 400, {}, {"reason": "BadRequest"}
        scripted = self.next_answer(token)
        return scripted if scripted is not None else (200, {}, {})


# --- Google: the token endpoint and FCM HTTP v1 --------------------------------------------------------


class GoogleStandin(_Answers):
    def __init__(self, certificates: Certificates, ttl: int) -> None:
        super().__init__()
        self.ttl = ttl
        self.public_key: rsa.RSAPublicKey | None = None
        self.account: dict[str, str] = {}
        self.issued: list[str] = []
        self.revoked: set[str] = set()
        self.token_requests = 0
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                if self.path == "/token":
                    status, answer = standin._token(headers, raw)
                    extra: dict[str, str] = {}
                else:
                    status, extra, answer = standin._message(self.path, headers, raw)
                content = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json; charset=UTF-8")
                self.send_header("content-length", str(len(content)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(content)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = certificates.server_context(["http/1.1"]).wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.token_uri = f"{self.url}/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        # What it issued stays valid: a sender's process keeps its token from test to test.
        super().reset()
        with self.lock:
            self.revoked.clear()

    def _token(self, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.token_requests += 1
        form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        problems = []
        if not headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            problems.append(f"token request content-type {headers.get('content-type')}")
        if form.get("grant_type") != JWT_BEARER:
            problems.append(f"grant_type {form.get('grant_type')}")
        try:
            header = jwt.get_unverified_header(form.get("assertion", ""))
            claims = jwt.decode(
                form.get("assertion", ""), self.public_key, algorithms=["RS256"], audience=GOOGLE_TOKEN_AUDIENCE,
                options={"require": ["iat", "exp", "iss", "aud"]},
            )  # fmt: skip
        except jwt.PyJWTError as error:
            problems.append(f"assertion refused: {error}")
            header, claims = {}, {}
        if claims:
            if header.get("kid") != self.account["private_key_id"] or claims.get("iss") != self.account["client_email"]:
                problems.append(f"assertion kid/iss {header} {claims}")
            if FCM_SCOPE not in str(claims.get("scope", "")).split():
                problems.append(f"scope {claims.get('scope')}")
            if claims["exp"] - claims["iat"] > 3600:
                problems.append("assertion lives longer than an hour")
        if problems:
            with self.lock:
                self.problems.extend(f"token endpoint: {p}" for p in problems)
            return 400, {"error": "invalid_grant", "error_description": "; ".join(problems)}
        token = f"ya29.{uuid.uuid4().hex}"
        with self.lock:
            self.issued.append(token)
        return 200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}

    def _message(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
        problems: list[str] = []
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
            problems.append("the body is not JSON")
        message = body.get("message", {}) if isinstance(body, dict) else {}
        token = str(message.get("token", ""))
        status, extra, answer = self._check(path, headers, body, message, token, problems)
        with self.lock:
            self.received.append(Received(path, headers, body, status, time.monotonic()))
            self.problems.extend(f"FCM {token[-6:]}: {p}" for p in problems)
        return status, extra, answer

    def _check(
        self, path: str, headers: dict[str, str], body: dict[str, Any], message: dict[str, Any], token: str,
        problems: list[str],
    ) -> tuple[int, dict[str, str], dict[str, Any]]:  # fmt: skip
        if path != f"/v1/projects/{PROJECT_ID}/messages:send":
            problems.append(f"path {path}")
            return 404, {}, _fcm_error(404, "NOT_FOUND", "unknown path")
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        with self.lock:
            known, revoked = bearer in self.issued, bearer in self.revoked
        if not known:
            problems.append("a bearer the token endpoint never issued")
        if not known or revoked:
            return 401, {}, _fcm_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        if not headers.get("content-type", "").startswith("application/json"):
            problems.append(f"content-type {headers.get('content-type')}")
        if set(body) != {"message"} or set(message) != {"token", "notification", "data", "android"}:
            problems.append(f"message keys {sorted(message)}")
        notification, data, android = (
            message.get("notification", {}),
            message.get("data", {}),
            message.get("android", {}),
        )
        if set(notification) != {"title", "body"} or not all(isinstance(v, str) and v for v in notification.values()):
            problems.append(f"notification {notification}")
        if set(data) != {"jobId", "notificationId", "jobType", "status"} or not all(
            isinstance(v, str) for v in data.values()
        ):
            problems.append(f"data {data}")  # FCM's data values are strings only
        if android != {"collapse_key": data.get("jobId"), "priority": "high", "ttl": f"{self.ttl}s"}:
            problems.append(f"android {android}")
        if problems:
            return 400, {}, _fcm_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        scripted = self.next_answer(token)
        if scripted is not None:
            return scripted
        return 200, {}, {"name": f"projects/{PROJECT_ID}/messages/{uuid.uuid4().hex}"}


def _fcm_error(code: int, status: str, message: str, error_code: str = "") -> dict[str, Any]:
    details = (
        [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": error_code}]
        if error_code
        else []
    )
    return {"error": {"code": code, "message": message, "status": status, "details": details}}


def fcm_unregistered() -> tuple[int, dict[str, str], dict[str, Any]]:
    return 404, {}, _fcm_error(404, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED")


def fcm_unavailable(retry_after: str = "0") -> tuple[int, dict[str, str], dict[str, Any]]:
    return (
        503,
        {"retry-after": retry_after},
        _fcm_error(503, "UNAVAILABLE", "The service is currently unavailable.", "UNAVAILABLE"),
    )


@dataclass
class PushStandins:
    apns: ApnsStandin
    google: GoogleStandin
    certificates: Certificates
    apns_key_file: Path
    service_account_file: Path

    def settings(self) -> dict[str, str]:
        """The settings (and environment) that send pushes to these stand-ins."""
        return {
            "APNS_ENDPOINT": self.apns.url,
            "APNS_KEY_FILE": str(self.apns_key_file),
            "APNS_KEY_ID": KEY_ID,
            "APNS_TEAM_ID": TEAM_ID,
            "APNS_TOPIC": TOPIC,
            "FCM_ENDPOINT": self.google.url,
            "FCM_SERVICE_ACCOUNT_FILE": str(self.service_account_file),
            "PUSH_CA_FILE": str(self.certificates.ca_file),
        }

    def reset(self) -> None:
        self.apns.reset()
        self.google.reset()

    def close(self) -> None:
        self.apns.close()
        self.google.close()


def start_push_standins(directory: Path, *, ttl: int = 86400) -> PushStandins:
    certificates = make_certificates(directory / "tls")
    apns_key_file, apns_public = make_apns_key(directory)
    apns = ApnsStandin(certificates, apns_public, ttl)
    google = GoogleStandin(certificates, ttl)
    account_file, account_public, account = make_service_account(directory, google.token_uri)
    google.public_key, google.account = account_public, account
    return PushStandins(apns, google, certificates, apns_key_file, account_file)
