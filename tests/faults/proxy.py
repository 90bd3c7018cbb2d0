"""A small asyncio TCP proxy in front of Redis, with switchable network faults.

It listens on a free loopback port and forwards every connection to the target. Modes:

- ``PASS``: bytes flow both ways.
- ``BLACKHOLE``: a partition. Open connections stay open but nothing is forwarded either way
  (what arrives is discarded, as a dropped packet would be), and new connections are accepted and
  held without ever reaching Redis. Clients see silence: only their socket timeout ends a call.
  Leaving the blackhole resets every connection that lived through it (a real partition that
  outlasts the client's timeout leaves those connections unusable); new ones work again.
- ``RESET``: every open connection is reset (RST), and new ones are reset as soon as they
  are accepted, until the mode changes.

And one armed fault: :meth:`Proxy.drop_next_reply` forwards the next command that contains
``match`` (any command if ``match`` is None) to Redis, waits until the reply starts coming back
(so the command has certainly run: Redis replies after executing), discards the reply and
resets the client's connection. The client cannot tell whether the command ran, which is the
case redis-py resends a command in.

Usage, inside the test's event loop::

    async with Proxy(redis_port) as proxy:
        client = Redis.from_url(proxy.url)
        dropped = proxy.drop_next_reply(match=queue.scripts.enqueue.sha.encode())
        await queue.enqueue(...)            # redis-py reconnects and resends
        await dropped.wait(5)               # the fault really happened
        proxy.set_mode(Mode.BLACKHOLE)
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from dataclasses import dataclass, field
from enum import Enum

CHUNK = 65536


class Mode(str, Enum):
    PASS = "pass"
    BLACKHOLE = "blackhole"
    RESET = "reset"


@dataclass
class DroppedReply:
    """An armed "drop the next reply"; ``command`` is the request whose reply was dropped."""

    match: bytes | None
    command: bytes = b""
    reply: bytes = b""
    done: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait(self, timeout: float) -> DroppedReply:
        async with asyncio.timeout(timeout):
            await self.done.wait()
        return self


def _abort(writer: asyncio.StreamWriter) -> None:
    """Closes with an RST (SO_LINGER 0), as a crashed peer or a firewall reset would."""
    transport = writer.transport
    if transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class _Pair:
    """One client connection and, unless it arrived in a blackhole, its upstream one."""

    def __init__(self, proxy: Proxy, client: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.held = False  # lived through a blackhole: reset when it ends
        self.dropping: DroppedReply | None = None
        self.tasks: list[asyncio.Task[None]] = []

    def abort(self) -> None:
        _abort(self.client)
        if self.upstream is not None:
            _abort(self.upstream)

    async def pump(self, reader: asyncio.StreamReader, upstream: bool) -> None:
        """Copies one direction; ``upstream`` is True for client -> Redis."""
        peer = self.upstream if upstream else self.client
        assert peer is not None
        try:
            while data := await reader.read(CHUNK):
                proxy = self.proxy
                if proxy.mode is Mode.BLACKHOLE:
                    self.held = True
                    continue  # lost in the partition
                if upstream:
                    armed = proxy._armed
                    if armed is not None and (armed.match is None or armed.match in data):
                        proxy._armed = None
                        armed.command = data
                        self.dropping = armed
                elif self.dropping is not None:
                    dropped, self.dropping = self.dropping, None
                    dropped.reply = data
                    self.abort()
                    proxy.dropped_replies += 1
                    dropped.done.set()
                    return
                peer.write(data)
                await peer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self.abort()


class Proxy:
    """The proxy; an async context manager (``async with Proxy(port) as proxy``)."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.mode = Mode.PASS
        self.port = 0
        self.accepted = 0
        self.dropped_replies = 0
        self._armed: DroppedReply | None = None
        self._pairs: set[_Pair] = set()
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    @property
    def open_connections(self) -> int:
        return len(self._pairs)

    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for pair in list(self._pairs):
            pair.abort()
        tasks = [t for pair in list(self._pairs) for t in pair.tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Proxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def set_mode(self, mode: Mode) -> None:
        previous, self.mode = self.mode, mode
        if mode is Mode.RESET:
            for pair in list(self._pairs):
                pair.abort()
        elif previous is Mode.BLACKHOLE:
            for pair in list(self._pairs):
                if pair.held or pair.upstream is None:
                    pair.abort()

    def drop_next_reply(self, match: bytes | None = None) -> DroppedReply:
        """Arms the fault for the next command containing ``match`` (on any connection)."""
        self._armed = DroppedReply(match)
        return self._armed

    def reset_all(self) -> None:
        """Resets every open connection once, staying in the current mode."""
        for pair in list(self._pairs):
            pair.abort()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        pair = _Pair(self, writer)
        self._pairs.add(pair)
        try:
            if self.mode is Mode.RESET:
                _abort(writer)
                return
            if self.mode is Mode.BLACKHOLE:
                pair.held = True
                while self.mode is Mode.BLACKHOLE and await reader.read(CHUNK):
                    pass  # swallowed; the client hears nothing
                if pair.held:
                    pair.abort()
                return
            try:
                up_reader, pair.upstream = await asyncio.open_connection(*self.target)
            except OSError:
                _abort(writer)
                return
            pair.tasks = [
                asyncio.create_task(pair.pump(reader, upstream=True)),
                asyncio.create_task(pair.pump(up_reader, upstream=False)),
            ]
            await asyncio.gather(*pair.tasks, return_exceptions=True)
        finally:
            pair.abort()
            self._pairs.discard(pair)
