"""Every part of sse-starlette the gateway replaces for speed, behind one guard on its version.

sse-starlette sends each event through ``EventSourceResponse._send_with_timeout`` (private),
which opens an anyio cancel scope, and so a timer, around every write: with thousands of viewers
that costs more than the write itself. :class:`WatchedSend` replaces it: one watchdog per event
loop (:class:`SendWatch`) ends a write that waits longer than the stream's ``send_timeout``,
and body messages go straight to the server's own ``send`` (``SERVER_SEND``, put in the scope
by :class:`gateway.middleware.GatewayApp`) past the middleware chain, whose wrappers look at a
response's start only (ASGI's public contract, no sse-starlette internals).

The replacement is on only with the sse-starlette release it was tested on
(:data:`TESTED_VERSIONS`; pyproject.toml allows a range): with any other, :func:`check` logs one
warning and sse-starlette's own send runs, its timeout included.
tests/gateway/test_sse_patches.py runs both on the same streams and compares every message;
``bench/fanout.py --readers shared,unpatched`` shows what the replacement buys. Upgrading
sse-starlette: install it, run those tests, move :data:`TESTED_VERSIONS` (until then the
gateway runs on sse-starlette's own send).
"""

from __future__ import annotations

import asyncio
import time

from sse_starlette import EventSourceResponse
from sse_starlette.sse import SendTimeoutError
from starlette.types import Message, Receive, Scope, Send

from genq import PatchGuard

from ..middleware import SERVER_SEND
from ._per_loop import PerLoop

GUARD = PatchGuard(
    tested={"sse-starlette": "3.7.1"},
    off_warning="the gateway's sse-starlette patch is off; event streams use sse-starlette's "
    "own send (slower with many viewers)",
    logger="gateway.events",
)
"""On with the release the replacement was written and tested against; each stream asks it
once, when it starts."""

TESTED_VERSIONS = GUARD.tested
version_mismatch = GUARD.version_mismatch
check = GUARD.check
set_patched = GUARD.set_patched
patched = GUARD.patched


class WatchedSend(EventSourceResponse):
    """An event stream whose send timeout is kept by the event loop's :class:`SendWatch`
    instead of a cancel scope per write, and whose body messages skip the middleware chain;
    sse-starlette's own send when the replacement is off (decided once per stream)."""

    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self.sending_since = 0.0
        """``time.monotonic()`` when the write in progress started; 0 between writes."""
        self._patched = False
        self._sender: asyncio.Task[object] | None = None
        self._stalled = False
        self._server_send: Send | None = None
        """Where body messages go: the server's own ``send`` (see ``GatewayApp``)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._patched = patched()
        watch = SendWatch.of_this_loop() if self._patched and self.send_timeout else None
        if watch is not None:
            watch.add(self)
        self._server_send = scope.get(SERVER_SEND)
        try:
            await super().__call__(scope, receive, send)
        finally:
            if watch is not None:
                watch.discard(self)

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        if not self._patched:
            await super()._send_with_timeout(send, message)
            return
        if self._sender is None:
            self._sender = asyncio.current_task()
        self.sending_since = time.monotonic()
        if message["type"] == "http.response.body" and self._server_send is not None:
            send = self._server_send  # past the chain: its wrappers only look at the start
        try:
            await send(message)
        except asyncio.CancelledError:
            if not self._stalled:
                raise
            if self._sender is not None:
                self._sender.uncancel()
            raise SendTimeoutError() from None
        finally:
            self.sending_since = 0.0

    def stall(self) -> None:
        """Ends the write in progress with :class:`SendTimeoutError` (its client took none)."""
        if self._sender is not None and not self._stalled:
            self._stalled = True
            self._sender.cancel()


class SendWatch(PerLoop):
    """Every open stream of one event loop, checked a few times per send timeout: a write
    that has waited longer than its stream's ``send_timeout`` is ended (at most a quarter of
    the timeout late)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.streams: set[WatchedSend] = set()
        self._task: asyncio.Task[None] | None = None

    def add(self, stream: WatchedSend) -> None:
        self.streams.add(stream)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch(), name="sse send watch")

    def discard(self, stream: WatchedSend) -> None:
        self.streams.discard(stream)
        if not self.streams and self._task is not None:
            self._task.cancel()  # no task left sleeping when the server stops
            self._task = None

    async def _watch(self) -> None:
        while self.streams:
            await asyncio.sleep(min(s.send_timeout or 0.0 for s in self.streams) / 4)
            now = time.monotonic()
            for stream in list(self.streams):
                since, limit = stream.sending_since, stream.send_timeout
                if since and limit and now - since >= limit:
                    stream.stall()


check()
