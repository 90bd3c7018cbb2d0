"""The gateway's uvicorn protocol writes a plain answer (one with a Content-Length) in one socket
write, head and body together, and every other answer as uvicorn does: a streamed one's head at
once, a HEAD answer's head alone, a head whose body never came before the connection closes."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.config import Config
from uvicorn.server import ServerState

from gateway.connection_guard import GuardedHttpToolsProtocol


class Socket:
    """The transport uvicorn writes to: what reached the socket, one entry per write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 80)}.get(name, default)

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


async def served(app: Any, request: bytes, settle: float = 0.05) -> Socket:
    config = Config(app, access_log=False, log_level="critical")
    config.load()
    protocol = GuardedHttpToolsProtocol(
        config, ServerState(), {}, asyncio.get_running_loop(), header_timeout=5, max_connections=9
    )
    socket = Socket()
    protocol.connection_made(socket)  # type: ignore[arg-type]
    protocol.data_received(request)
    await asyncio.sleep(settle)
    protocol.connection_lost(None)
    return socket


POST = b"POST /v1/generations HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
PLAIN_HEAD = (b"content-type", b"application/json"), (b"content-length", b"11")


async def plain(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 202, "headers": list(PLAIN_HEAD)})
    await send({"type": "http.response.body", "body": b'{"id":"x"}\n'})


async def test_one_write_plain_answer_is_one_write() -> None:
    socket = await served(plain, POST)
    assert len(socket.writes) == 1
    head, _, body = socket.writes[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 202 Accepted\r\n")
    assert b"content-length: 11" in head
    assert body == b'{"id":"x"}\n'


async def test_one_write_head_answer_keeps_its_head() -> None:
    socket = await served(plain, b"HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert len(socket.writes) == 1
    assert socket.writes[0].startswith(b"HTTP/1.1 202 Accepted\r\n")
    assert socket.writes[0].endswith(b"\r\n\r\n")


async def test_one_write_streamed_answer_sends_its_head_at_once() -> None:
    first_event = asyncio.Event()
    seen_before_the_body: list[bytes] = []

    async def stream(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await first_event.wait()
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def viewer() -> None:
        await asyncio.sleep(0.02)
        seen_before_the_body.extend(socket_box[0].writes)
        first_event.set()

    socket_box: list[Socket] = []
    config = Config(stream, access_log=False, log_level="critical")
    config.load()
    protocol = GuardedHttpToolsProtocol(
        config, ServerState(), {}, asyncio.get_running_loop(), header_timeout=5, max_connections=9
    )
    socket_box.append(Socket())
    protocol.connection_made(socket_box[0])  # type: ignore[arg-type]
    protocol.data_received(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
    await viewer()
    await asyncio.sleep(0.05)
    protocol.connection_lost(None)
    assert len(seen_before_the_body) == 1
    assert seen_before_the_body[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"transfer-encoding: chunked" in seen_before_the_body[0]
    assert socket_box[0].writes[1:] == [b"9\r\ndata: 1\n\n\r\n", b"0\r\n\r\n"]


async def test_one_write_head_without_its_body_is_written_before_the_close() -> None:
    async def broken(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": list(PLAIN_HEAD)})
        raise RuntimeError("the route failed after its answer started")

    socket = await served(broken, POST)
    assert socket.closed
    assert len(socket.writes) == 1
    assert socket.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
