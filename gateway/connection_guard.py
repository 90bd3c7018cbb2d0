"""uvicorn's HTTP protocol with a deadline for request heads and a cap on open connections.

uvicorn's httptools protocol arms no timer before a connection's first response, and the
keep-alive timer it arms after a response is cancelled by the first byte of the next request:
a client that sends part of a request head and then nothing holds its connection, and a file
descriptor, for as long as it likes. Its ``limit_concurrency`` answers 503 only once a head is
complete, logs every refusal, and keeps accepting connections meanwhile.

:class:`GuardedHttpToolsProtocol` closes a connection whose request head is not complete
``header_timeout`` seconds after it opened (or after the head began, on a kept-alive
connection), with a 408 when part of a head came, and closes a new connection at once, with a
503, while ``max_connections`` are open; and it writes a plain answer's head and body in one
socket write (:class:`_HeadWithBody`). It reads private parts of uvicorn's class, so
:func:`gateway.server_options.uvicorn_options` uses it only on the uvicorn version it was
tested with (``TESTED_UVICORN``) and otherwise falls back to ``limit_concurrency``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

log = logging.getLogger("gateway.connections")

QUIET_SECONDS = 5.0
"""A burst of refused connections ends after this long without a refusal."""


def _answer(status: bytes, detail: str, *extra: bytes) -> bytes:
    body = json.dumps({"detail": detail}).encode()
    head = [
        b"HTTP/1.1 " + status,
        b"content-type: application/json",
        b"content-length: " + str(len(body)).encode(),
        b"connection: close",
        *extra,
    ]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


HEAD_TIMED_OUT = _answer(b"408 Request Timeout", "request head not received in time")
AT_CAPACITY = _answer(
    b"503 Service Unavailable", "too many open connections; retry later", b"retry-after: 1"
)


class _Refusals:
    """Logs a burst of refused connections twice (when it starts and when it ends), never once
    per connection: a flood would otherwise flood the log too."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.count = 0
        self.last = 0.0
        self.timer: asyncio.TimerHandle | None = None

    def refused(self, cap: int) -> None:
        self.count += 1
        self.last = self.loop.time()
        if self.timer is None:
            log.warning(
                "connection cap reached: %d open connections (GENQ_MAX_CONNECTIONS); new "
                "connections get 503 and are closed until some close",
                cap,
            )
            self.timer = self.loop.call_later(QUIET_SECONDS, self._check)

    def _check(self) -> None:
        quiet = self.loop.time() - self.last
        if quiet < QUIET_SECONDS:
            self.timer = self.loop.call_later(QUIET_SECONDS - quiet, self._check)
            return
        log.warning(
            "connection cap: accepting again; %d connections were refused in the burst",
            self.count,
        )
        self.count = 0
        self.timer = None


_refusals: weakref.WeakKeyDictionary[ServerState, _Refusals] = weakref.WeakKeyDictionary()


def _refusals_of(server_state: ServerState, loop: asyncio.AbstractEventLoop) -> _Refusals:
    """One burst log per server (a test process may run several)."""
    refusals = _refusals.get(server_state)
    if refusals is None:
        refusals = _refusals[server_state] = _Refusals(loop)
    return refusals


class _HeadWithBody:
    """A response's transport that holds its head, when a Content-Length follows it, until its
    first body bytes and writes both at once: one socket write per plain answer instead of
    two, and each write is a system call (what that saves: docs/KNOWN_LIMITS.md). A streamed
    answer (chunked, an event stream) has its head written at once, as uvicorn does; a head
    still held when the connection closes is written first. Once the head is out it hands
    the cycle its transport back, so a stream's events are written without it."""

    def __init__(self, transport: asyncio.Transport, cycle: RequestResponseCycle) -> None:
        self._transport = transport
        self._cycle = cycle
        self._head: bytes | None = None

    def write(self, data: bytes) -> None:
        cycle = self._cycle
        if self._head is not None:
            data, self._head = self._head + data, None
            cycle.transport = self._transport
        elif cycle.response_started:
            # Only then is a body write sure to follow (uvicorn writes none for a HEAD).
            if cycle.chunked_encoding is False and cycle.scope["method"] != "HEAD":
                self._head = data
                return
            cycle.transport = self._transport
        self._transport.write(data)

    def close(self) -> None:
        if self._head is not None:
            self._transport.write(self._head)
            self._head = None
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """One connection, as uvicorn's httptools protocol serves it, with a deadline for each
    request head and the server's connection cap. uvicorn builds one per connection; the two
    limits come bound with ``functools.partial`` (the partial pickles, so ``--workers`` works)."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        header_timeout: float,
        max_connections: int,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.header_timeout = header_timeout
        self.max_connections = max_connections
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_begun = False
        self._refused = False

    def connection_made(  # type: ignore[override]
        self, transport: asyncio.Transport
    ) -> None:
        if len(self.connections) >= self.max_connections:
            # Closed before it is counted or read: a flood costs a descriptor only this long.
            self._refused = True
            self.transport = transport
            transport.write(AT_CAPACITY)
            transport.close()
            _refusals_of(self.server_state, self.loop).refused(self.max_connections)
            return
        super().connection_made(transport)
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        if not self._refused:
            super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_begun = True
        if self._head_timer is None:  # a kept-alive connection's next request
            self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._head_begun = False
        self._disarm_head_timer()
        super().on_headers_complete()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        cycle.transport = _HeadWithBody(cycle.transport, cycle)  # type: ignore[assignment]
        super()._start_asgi_task(cycle, app)

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        answering = self.cycle is not None and not self.cycle.response_complete
        if self._head_begun and not answering:  # a 408 cannot cut into another answer
            self.transport.write(HEAD_TIMED_OUT)
        self.transport.close()
