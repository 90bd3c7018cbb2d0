"""Every streaming response of the gateway, and the rule they all keep.

A stream holds one of its tenant's stream holds (``tenant_max_streams`` per gateway process,
429 with ``Retry-After`` beyond: :class:`gateway.admission.holds.TenantHolds`) from before its route
does anything that costs (enqueueing a generation above all) until it ends, however it ends;
a client that leaves a write untaken for ``sse_send_timeout`` is dropped; and the stream ends
after ``sse_max_duration``, between two events (its content follows the shared tail
``until`` :attr:`StreamHold.until`). A route streams only through :func:`stream_hold`::

    with stream_hold(gateway, tenant) as hold:  # 429 here: nothing done yet
        owned = await accept(...)  # raising gives the hold back
        return hold.respond(content(owned, until=hold.until))

so that a refused stream has enqueued, reserved and charged nothing. The native events route
and the OpenAI routes go through it; so must any new streaming route (the AI SDK's).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager

from sse_starlette.sse import SendTimeoutError
from starlette.types import Message, Receive, Scope, Send

from ..state import Gateway
from ._quiet import QuietGate
from ._sse_patches import WatchedSend

log = logging.getLogger("gateway.events")

HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


class StreamHold:
    """One of a tenant's stream holds, taken: what the stream it becomes may take (its end,
    ``until``)."""

    def __init__(self, gateway: Gateway, release: Callable[[], None]) -> None:
        self.ending = Ending(release)
        self.until = asyncio.get_running_loop().time() + gateway.settings.sse_max_duration
        """The event loop's time at which the stream ends (``sse_max_duration`` from now)."""
        self._send_timeout = gateway.settings.sse_send_timeout
        self.responded = False

    def respond(
        self, content: AsyncIterator[bytes], headers: Mapping[str, str] = HEADERS
    ) -> HeldStream:
        """The stream of ``content`` (SSE bytes), which takes the hold over: it frees it when
        it ends. Keepalives are the content's own (the shared tail's heartbeat). ``headers``:
        a stream whose client expects others (the AI SDK's) gives its own."""
        self.responded = True
        return HeldStream(
            content, self.ending, ping=0, send_timeout=self._send_timeout, headers=headers
        )


@contextmanager
def stream_hold(gateway: Gateway, tenant: str) -> Iterator[StreamHold]:
    """Takes one of ``tenant``'s stream holds, or raises :class:`gateway.errors.RateLimited`
    (429); the hold is given back when the block raises or ends without
    :meth:`StreamHold.respond`."""
    hold = StreamHold(gateway, gateway.open_streams.take(tenant))
    try:
        yield hold
    except BaseException:
        hold.ending.release()
        raise
    if not hold.responded:
        hold.ending.release()


class Ending:
    """How a stream that delivered its terminal event ends: its tenant's hold is free at once,
    the rest (the end of the response, sse-starlette's teardown) waits for a quiet moment of
    the event loop (:class:`~gateway.streaming._quiet.QuietGate`), so that the teardown of
    thousands of streams ending together does not hold back other viewers' events."""

    __slots__ = ("release", "turn")

    def __init__(self, release: Callable[[], None]) -> None:
        self.release = release
        """Frees the tenant's stream hold (idempotent)."""
        self.turn: asyncio.Future[None] | None = None
        """Set once the terminal event is on its way: done when the stream may end."""

    def begin(self) -> None:
        self.turn = QuietGate.of_this_loop().wait()


class HeldStream(WatchedSend):
    """An event stream holding one of its tenant's stream holds until it ends, however it
    ends; a slow reader's send timeout ends it quietly rather than with a traceback.

    Its sends are :class:`gateway.streaming._sse_patches.WatchedSend`'s (one watchdog per event loop
    instead of sse-starlette's cancel scope around every write, on the tested sse-starlette). A
    client that hangs up after the terminal event does not hurry the stream's end (see
    :class:`Ending`)."""

    def __init__(self, content: AsyncIterator[bytes], ending: Ending, **kw: object):
        super().__init__(content, **kw)
        self._ending = ending
        self._release = ending.release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ending = self._ending

        async def receive_until_ended() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and ending.turn is not None:
                await asyncio.shield(ending.turn)  # then the stream ends by itself anyway
            return message

        try:
            await super().__call__(scope, receive_until_ended, send)
        except SendTimeoutError:
            log.info("closed an event stream: its client took no data for %ss", self.send_timeout)
        finally:
            self._release()
