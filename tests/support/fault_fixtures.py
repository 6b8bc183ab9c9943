"""Real faults for the fault tests, never the machine's shared servers:

- ``PrivatePostgres``: a cluster of its own, made with PostgreSQL's ``initdb`` and run
  with ``pg_ctl`` (Debian keeps both off PATH, in its versioned lib folder) as user
  ``postgres`` on a free port, stopped and started under load;
- ``PrivateRedis``: a ``redis-server`` on a free port that keeps nothing on disk,
  killed with SIGKILL and started again on the same port (empty, as after a crash);
- ``TcpProxy``: a TCP relay to a server that cannot be stopped (the shared RabbitMQ):
  ``cut()`` resets every relayed connection and refuses new ones until ``restore()``;
  between an HTTP client and server, an unreliable network too: lost answers,
  resets, latency and partitions.

Import the fixtures (``private_redis``) into a test module."""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from select import select

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


# --- PostgreSQL ------------------------------------------------------------------------------


def postgres_bin() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` with ``initdb`` (``PG_BIN`` wins)."""
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    assert found, "PostgreSQL's initdb not found under /usr/lib/postgresql (set PG_BIN)"
    return found[-1].parent


class PrivatePostgres:
    """A PostgreSQL cluster of the test's own. PostgreSQL refuses to run as root, so
    as root every command runs as ``postgres`` in a folder that user owns."""

    def __init__(self) -> None:
        self.bin = postgres_bin()
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="aijobs-fault-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / tool), *args]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise AssertionError(f"{tool} failed: {done.stdout}{done.stderr}")
        return done

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """``fast`` ends every session at once, as a restart or a failover does."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop", check=False)

    def psql(self, sql: str, database: str = "postgres") -> str:
        return self._run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database,
                         "-Atqc", sql).stdout  # fmt: skip

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


# --- Redis -------------------------------------------------------------------------------------


class PrivateRedis:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        self.started += 1
        log = self.folder / f"redis-{self.port}.log"
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder), "--logfile", str(log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait(lambda: port_open(self.port), 20, "redis-server to listen")

    def kill(self) -> None:
        """SIGKILL: every connection drops at once and the data is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


# --- a TCP relay that can be cut, and a network that misbehaves ----------------------------------


class TcpProxy:
    """Relays 127.0.0.1:``port`` to ``upstream``. ``cut()`` resets every relayed
    connection (RST, as a broker that dies) and closes the listener, so new
    connections are refused; ``restore()`` listens again on the same port.

    Between an HTTP client and server it is also an unreliable network, each fault
    decided per request (a chunk from the client that starts with an HTTP method):
    ``lose_rate`` forwards the request and loses its answer (the connection is reset
    when the answer comes: the server did the work, the client never hears of it),
    ``reset_rate`` resets the connection before the request reaches the server,
    ``latency`` delays every chunk, and ``lose_next(marker)`` loses the answer of the
    next request whose first line holds ``marker``. ``partition()`` holds every byte in
    both directions (new connections are accepted, and wait too) until ``heal()``:
    a client sees timeouts, and what it sent arrives once the network heals, as TCP
    delivers it. ``record(marker)`` keeps the answers of matching requests as the
    server sent them, delivered or not (``answers``)."""

    def __init__(self, upstream: tuple[str, int], *, seed: int = 0) -> None:
        self.upstream = upstream
        self.port = 0
        self.lose_rate = 0.0
        self.reset_rate = 0.0
        self.latency = 0.0
        self.lost: list[str] = []  # the request lines whose answers were lost
        self.resets: list[str] = []  # the request lines reset before reaching the server
        # (time.monotonic() the request went to the server and its answer came, request line, body)
        self.answers: list[tuple[float, float, str, bytes]] = []
        self._recorded: list[str] = []
        self._lose_next: list[str] = []
        self._random = random.Random(seed)
        self._healed = threading.Event()
        self._healed.set()
        self.partitions: list[tuple[float, float | None]] = []  # (start, end) in time.monotonic()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.restore()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- faults ----------------------------------------------------------------------------

    def lose_next(self, marker: str) -> None:
        with self._lock:
            self._lose_next.append(marker)

    def record(self, marker: str) -> None:
        self._recorded.append(marker)

    def partition(self) -> None:
        with self._lock:
            if self._healed.is_set():
                self.partitions.append((time.monotonic(), None))
            self._healed.clear()

    def heal(self) -> None:
        with self._lock:
            if not self._healed.is_set():
                start, _ = self.partitions[-1]
                self.partitions[-1] = (start, time.monotonic())
            self._healed.set()

    def partition_for(self, seconds: float) -> threading.Timer:
        """A partition now, healed ``seconds`` later (a timer thread)."""
        self.partition()
        timer = threading.Timer(seconds, self.heal)
        timer.daemon = True
        timer.start()
        return timer

    def _fault(self, line: str) -> str | None:
        with self._lock:
            for index, marker in enumerate(self._lose_next):
                if marker in line:
                    del self._lose_next[index]
                    return "lose"
            roll = self._random.random()
        if roll < self.reset_rate:
            return "reset"
        if roll < self.reset_rate + self.lose_rate:
            return "lose"
        return None

    # --- the relay ---------------------------------------------------------------------------

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(256)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name="tcp-proxy", daemon=True).start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _reset(sock)

    def close(self) -> None:
        self.heal()
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(listener, client), daemon=True).start()

    def _connect(self, listener: socket.socket, client: socket.socket) -> None:
        self._healed.wait()  # a partition: the connection is not made until it heals
        try:
            server = socket.create_connection(self.upstream, timeout=5)
            server.settimeout(None)
        except OSError:
            client.close()
            return
        with self._lock:
            if self._listener is not listener:  # cut meanwhile
                client.close()
                server.close()
                return
            self._sockets |= {client, server}
        self._relay(client, server)

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        lose, line, answer, sent = False, "", b"", 0.0
        waiting = False  # a recorded request's answer is not whole yet: read it, whatever the client does
        ends = [client, server]
        try:
            while True:
                readable, _, _ = select(ends, [], [], 1.0)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data and sock is client and waiting:
                        ends = [server]  # the client gave up: the server still answers, and is heard
                        continue
                    if not data:
                        raise OSError("closed")
                    received = time.monotonic()  # when the server answered, were the network cut
                    self._healed.wait()  # a partition holds every byte until it heals
                    if self.latency:
                        time.sleep(self.latency)
                    if sock is client:
                        request = _request_line(data)
                        if request is not None:
                            line, answer = request, b""
                            fault = self._fault(line)
                            if fault == "reset":
                                self.resets.append(line)
                                raise OSError("reset")
                            lose = fault == "lose"
                            waiting = any(marker in line for marker in self._recorded)
                        server.sendall(data)
                        sent = time.monotonic()
                        continue
                    if waiting:
                        answer = self._keep(line, answer + data, sent, received)
                        waiting = bool(answer)
                    if lose or client not in ends:
                        if lose and not waiting:
                            self.lost.append(line)
                        if not waiting:
                            raise OSError("lost")
                        continue
                    client.sendall(data)
        except (OSError, ValueError):
            for sock in (client, server):
                _reset(sock)
            with self._lock:
                self._sockets -= {client, server}

    def _keep(self, line: str, answer: bytes, sent: float, received: float) -> bytes:
        """Record the answer once whole (its Content-Length); what is left to gather."""
        head, sep, body = answer.partition(b"\r\n\r\n")
        if not sep:
            return answer
        length = next(
            (int(h.split(b":", 1)[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")), 0
        )
        if len(body) < length:
            return answer
        self.answers.append((sent, received, line, body[:length]))
        return b""


_METHODS = (b"GET ", b"POST ", b"PUT ", b"PATCH ", b"DELETE ", b"HEAD ")


def _request_line(data: bytes) -> str | None:
    if not data.startswith(_METHODS):
        return None
    return data.split(b"\r\n", 1)[0].decode("latin-1")


def _reset(sock: socket.socket) -> None:
    """Close with an RST, as a network that drops a connection does."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def stop_process(process: subprocess.Popen[bytes], timeout: float = 15) -> int | None:
    """SIGTERM, then SIGKILL past ``timeout``; the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    return process.returncode
