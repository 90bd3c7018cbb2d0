"""Connections that never finish a request head, and more connections than a process can hold
(issue 37, item 4): ``genq serve`` run for real, probed with raw sockets on loopback."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import pickle
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from gateway.connection_guard import GuardedHttpToolsProtocol
from gateway.server_options import FD_RESERVE, connection_cap, uvicorn_options
from tests.gateway.conftest import SECRET, make_settings
from tests.polling import waited_for
from tests.ports import free_port

PARTIAL_HEAD = b"GET / HTTP/1.1\r\nHost: x\r\n"
DEV_KEY = "genq-dev-key"
CAP_REACHED = "connection cap reached"
CAP_LIFTED = "connection cap: accepting again"


@dataclass
class Served:
    url: str
    port: int
    stderr: Path

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")

    def healthz(self) -> int:
        # The server closes the connection itself: gone from its count before the next one.
        headers = {"Connection": "close"}
        return httpx.get(f"{self.url}/healthz", headers=headers, timeout=5).status_code


@contextlib.contextmanager
def genq_serve(redis_url: str, prefix: str, tmp_path: Path, **env: str) -> Iterator[Served]:
    """``python -m genq_cli serve`` (what the ``genq`` script runs) in dev mode."""
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GENQ_")}
    environ.update(
        GENQ_DEV="1",
        GENQ_SECRET=SECRET,
        GENQ_REDIS_URL=redis_url,
        GENQ_QUEUE_NAMESPACE=prefix,
        GENQ_MODELS="demo/fast",
        **env,
    )
    stderr = tmp_path / "serve.stderr"
    with stderr.open("wb") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "genq_cli", "serve", "--port", str(port)],
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    served = Served(f"http://127.0.0.1:{port}", port, stderr)
    try:

        def ready() -> bool:
            assert server.poll() is None, f"genq serve exited:\n{served.log()}"
            with contextlib.suppress(httpx.TransportError):
                return served.healthz() == 200
            return False

        assert waited_for(ready, 30, 0.1), f"genq serve did not start:\n{served.log()}"
        yield served
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def partial_head(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(PARTIAL_HEAD)
    return sock


def until_closed(sock: socket.socket, deadline: float) -> bytes:
    """Everything the server sends before it closes the connection (a reset counts as closed);
    fails when it is still open at ``deadline``."""
    received = b""
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            return received
        except TimeoutError:
            raise AssertionError(f"still open; received {received!r}") from None
        if not chunk:
            return received
        received += chunk


def one_response(sock: socket.socket) -> bytes:
    """One whole response of a kept-alive connection (its body sized by Content-Length)."""
    received = b""

    def more() -> bytes:
        chunk = sock.recv(4096)
        assert chunk, f"closed mid-response: {received!r}"
        return chunk

    while b"\r\n\r\n" not in received:
        received += more()
    head = received.split(b"\r\n\r\n", 1)[0]
    length = re.search(rb"content-length: (\d+)", head, re.IGNORECASE)
    assert length, head
    while len(received) < len(head) + 4 + int(length[1]):
        received += more()
    return received


def test_serve_closes_partial_request_heads_after_header_timeout(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    with genq_serve(redis_url, prefix, tmp_path, GENQ_HEADER_TIMEOUT="1") as served:
        sockets = [partial_head(served.port) for _ in range(50)]
        try:
            assert served.healthz() == 200  # while all 50 hang
            deadline = time.monotonic() + 15
            answers = [until_closed(sock, deadline) for sock in sockets]
        finally:
            for sock in sockets:
                sock.close()
        assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), set(answers)
        assert b'{"detail": "request head not received in time"}' in answers[0]
        assert served.healthz() == 200


def test_serve_closes_a_kept_alive_connection_whose_next_head_stalls(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    """uvicorn's keep-alive timer stops at the first byte of the next request."""
    with genq_serve(redis_url, prefix, tmp_path, GENQ_HEADER_TIMEOUT="1") as served:
        with socket.create_connection(("127.0.0.1", served.port), timeout=5) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert one_response(sock).startswith(b"HTTP/1.1 200 ")
            sock.sendall(PARTIAL_HEAD)
            answer = until_closed(sock, time.monotonic() + 15)
        assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_serve_header_timeout_spares_an_answer_slower_than_it(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    """The deadline covers the request head only: a result wait longer than it completes, and
    the connection serves the next request."""
    with genq_serve(redis_url, prefix, tmp_path, GENQ_HEADER_TIMEOUT="1") as served:
        auth = {"Authorization": f"Bearer {DEV_KEY}"}
        with httpx.Client(base_url=served.url, headers=auth, timeout=30) as client:
            body = {"model": "demo/fast", "prompt": "x", "delay_ms": 60_000}
            job = client.post("/v1/generations", json=body).json()["id"]
            started = time.monotonic()
            waited = client.get(f"/v1/generations/{job}/result", params={"timeout": 2.5})
            assert waited.status_code == 202, waited.text
            assert time.monotonic() - started >= 2.5
            assert client.get("/healthz").status_code == 200


def test_serve_refuses_connections_past_max_connections(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    env = {"GENQ_MAX_CONNECTIONS": "20", "GENQ_HEADER_TIMEOUT": "60"}
    with genq_serve(redis_url, prefix, tmp_path, **env) as served:
        holders = [partial_head(served.port) for _ in range(20)]
        try:
            asking: list[bytes] = []
            silent: list[bytes] = []
            for n in range(10):
                with socket.create_connection(("127.0.0.1", served.port), timeout=5) as extra:
                    if n % 2:
                        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
                            extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                        asking.append(until_closed(extra, time.monotonic() + 10))
                    else:
                        silent.append(until_closed(extra, time.monotonic() + 10))
            # A request the close overtook may get a reset instead of the 503, never an answer.
            assert all(r == b"" or r.startswith(b"HTTP/1.1 503 ") for r in asking), asking
            assert all(r.startswith(b"HTTP/1.1 503 ") for r in silent), silent
            assert b"retry-after: 1" in silent[0]
        finally:
            for sock in holders:
                sock.close()

        def healthy() -> bool:
            with contextlib.suppress(httpx.TransportError):
                return served.healthz() == 200
            return False

        assert waited_for(healthy, 15, 0.1), "the gateway did not accept connections again"
        assert waited_for(lambda: CAP_LIFTED in served.log(), 30, 0.1), served.log()
        log = served.log()
        assert log.count(CAP_REACHED) == 1, log  # once for the burst, not per connection
        refused_count = re.search(r"(\d+) connections were refused in the burst", log)
        # The 10 above, and maybe a /healthz sent before the server saw the holders go.
        assert refused_count and int(refused_count[1]) >= 10, log


def test_uvicorn_options_bind_the_limits_to_the_guarded_protocol(
    redis_url: str, prefix: str
) -> None:
    settings = make_settings(redis_url, prefix, header_timeout=2.5, max_connections=300)
    protocol = uvicorn_options(settings, version="0.55.0")["http"]
    assert isinstance(protocol, functools.partial)
    assert protocol.func is GuardedHttpToolsProtocol
    assert protocol.keywords == {"header_timeout": 2.5, "max_connections": 300}
    # `genq serve --workers N` pickles uvicorn's config into each process.
    assert pickle.loads(pickle.dumps(protocol)).keywords == protocol.keywords


def test_uvicorn_options_fall_back_to_limit_concurrency_on_another_uvicorn(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(redis_url, prefix, max_connections=300)
    with caplog.at_level(logging.WARNING, logger="gateway.connections"):
        options = uvicorn_options(settings, version="0.56.1")
    assert options == {"limit_concurrency": 300}
    assert "uvicorn 0.56.1 is not the tested 0.55" in caplog.text
    assert "GENQ_HEADER_TIMEOUT is not enforced" in caplog.text


def test_connection_cap_leaves_headroom_under_the_fd_limit(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(redis_url, prefix)
    assert settings.max_connections == 10_000
    assert connection_cap(settings, fd_limit=20_000) == 10_000
    with caplog.at_level(logging.WARNING, logger="gateway.connections"):
        capped = connection_cap(settings, fd_limit=1024)
    assert capped == 1024 - FD_RESERVE - settings.redis_max_connections
    assert "ulimit -n 1024" in caplog.text


def test_serve_rejects_a_zero_header_timeout_naming_it(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GENQ_")}
    environ.update(GENQ_DEV="1", GENQ_REDIS_URL=redis_url, GENQ_HEADER_TIMEOUT="0")
    done = subprocess.run(
        [sys.executable, "-m", "genq_cli", "serve", "--port", str(free_port())],
        env=environ,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != 0
    assert "GENQ_HEADER_TIMEOUT" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
