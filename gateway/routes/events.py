"""The SSE route: a generation's events, resumable, fed by the shared tail.

``id:`` is the stream entry id, ``event:`` the type, ``data:`` JSON. The cursor is the later of
``Last-Event-ID`` (sent by a reconnecting EventSource) and ``?after=``. The stream ends after
the terminal event; a request whose cursor is already there gets 204, which stops EventSource
from reconnecting. A client that goes away only stops watching: the generation goes on.

What one client may hold: a cursor must be an entry id in ASCII digits (400 otherwise), and one
past the stream's newest entry is clamped to it; a tenant holds at most
``tenant_max_streams`` streams per gateway process (429 beyond); a client that does not take a
write for ``sse_send_timeout`` is dropped; and every stream ends cleanly after
``sse_max_duration``, when its client resumes from its ``Last-Event-ID``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated

from fastapi import APIRouter, Header, Query, Response
from sse_starlette import EventSourceResponse
from sse_starlette.sse import SendTimeoutError
from starlette.types import Message, Receive, Scope, Send

from genq import TERMINAL
from genq.events import check_cursor

from .._per_loop import PerLoop
from .._quiet import QuietGate
from ..deps import GatewayDep, JobId, JobTenantDep, OwnedJob, load_owned_job
from ..errors import BadRequest
from ..middleware import SERVER_SEND
from ..schemas import ERRORS
from ..tail import CursorRefused, Tail, ViewerLagged, order_of

log = logging.getLogger("gateway.events")

router = APIRouter(tags=["generations"], responses=ERRORS)

KEEPALIVE = b": ping\n\n"
REFUSED = b": Redis refused this stream's cursor\n\n"


def parse_cursor(value: str | None, source: str) -> str | None:
    """A stream entry id (``<ms>-<seq>``, or ``0`` for the start); 400 for anything else."""
    if value is None or value == "":
        return None
    try:
        check_cursor(value)
    except ValueError:
        raise BadRequest(
            f"malformed {source} {value[:60]!r}: expected an event id '<ms>-<seq>'"
        ) from None
    return "0-0" if value == "0" else value


def later_cursor(a: str | None, b: str | None) -> str | None:
    if a is None or b is None:
        return a or b
    return a if order_of(a) >= order_of(b) else b


@router.get(
    "/v1/generations/{job_id}/events",
    response_class=Response,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "The event stream"},
        204: {"description": "The cursor is already at the terminal event: nothing more"},
    },
)
async def generation_events(
    job_id: JobId,
    gateway: GatewayDep,
    tenant: JobTenantDep,
    after: Annotated[
        str | None, Query(description="Resume strictly after this event id", max_length=60)
    ] = None,
    last_event_id: Annotated[
        str | None, Header(alias="Last-Event-ID", description="Sent by EventSource on reconnect")
    ] = None,
) -> Response:
    """Server-sent events of one generation: chunk, progress, restarted, then completed,
    failed or cancelled. Takes a watch token (``?token=``) as well as an API key."""
    cursor = later_cursor(
        parse_cursor(after, "?after="), parse_cursor(last_event_id, "Last-Event-ID")
    )
    owned = await load_owned_job(gateway, job_id, tenant)
    ended, cursor = await _start(owned, cursor)
    if ended:
        return Response(status_code=204)
    settings = gateway.settings
    release = gateway.streams.take(tenant)
    retry_ms = int(settings.sse_retry_ms * random.uniform(0.5, 1.5))
    ending = _Ending(release)
    tail = gateway.tails[owned.provider]
    # ping=0: the shared tail already sends keepalives, only to quiet streams and spread out.
    return _SlotResponse(
        _stream(tail, job_id, cursor, retry_ms, settings.sse_max_duration, ending),
        ending,
        ping=0,
        send_timeout=settings.sse_send_timeout,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _start(owned: OwnedJob, cursor: str | None) -> tuple[bool, str | None]:
    """(already at the terminal event, the cursor to follow from).

    A cursor past the stream's newest entry names no event the client can have seen (a
    stream's ids only grow): it is clamped to that entry, so the client gets what comes next."""
    finished = owned.job.status in TERMINAL
    if cursor is None and not finished:
        return False, None
    last = await owned.queue.last_event(owned.job.id)
    newest = last.id if last else "0-0"
    past_end = cursor is not None and order_of(cursor) >= order_of(newest)
    if finished and (last is None or past_end):
        return True, cursor
    return False, newest if past_end else cursor


class _Ending:
    """How a stream that delivered its terminal event ends: its tenant's slot is free at once,
    the rest (the end of the response, sse-starlette's teardown) waits for a quiet moment of
    the event loop (:class:`~gateway._quiet.QuietGate`), so that the teardown of thousands of
    streams ending together does not hold back other viewers' events."""

    __slots__ = ("release", "turn")

    def __init__(self, release: Callable[[], None]) -> None:
        self.release = release
        """Frees the tenant's stream slot (idempotent)."""
        self.turn: asyncio.Future[None] | None = None
        """Set once the terminal event is on its way: done when the stream may end."""

    def begin(self) -> None:
        self.turn = QuietGate.of_this_loop().wait()


class _SlotResponse(EventSourceResponse):
    """An event stream holding one of its tenant's stream slots until it ends, however it
    ends; a slow reader's send timeout ends it quietly rather than with a traceback.

    The send timeout is kept by one watchdog per event loop (:class:`_SendWatch`) instead of
    sse-starlette's cancel scope around every write, which cost more than the write itself
    (an anyio scope and a timer per viewer and event). A client that hangs up after the
    terminal event does not hurry the stream's end (see :class:`_Ending`)."""

    def __init__(self, content: AsyncIterator[bytes], ending: _Ending, **kw: object):
        super().__init__(content, **kw)  # type: ignore[arg-type]
        self._ending = ending
        self._release = ending.release
        self.sending_since = 0.0
        """``time.monotonic()`` when the write in progress started; 0 between writes."""
        self._sender: asyncio.Task[object] | None = None
        self._stalled = False
        self._server_send: Send | None = None
        """Where body messages go: the server's own ``send`` (see ``GatewayApp``)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watch = _SendWatch.of_this_loop() if self.send_timeout else None
        if watch is not None:
            watch.add(self)
        ending = self._ending
        self._server_send = scope.get(SERVER_SEND)

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
            if watch is not None:
                watch.discard(self)
            self._release()

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
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


class _SendWatch(PerLoop):
    """Every open stream of one event loop, checked a few times per send timeout: a write
    that has waited longer than its stream's ``send_timeout`` is ended (at most a quarter of
    the timeout late)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.streams: set[_SlotResponse] = set()
        self._task: asyncio.Task[None] | None = None

    def add(self, stream: _SlotResponse) -> None:
        self.streams.add(stream)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch(), name="sse send watch")

    def discard(self, stream: _SlotResponse) -> None:
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


async def _stream(
    tail: Tail, job_id: str, cursor: str | None, retry_ms: int, max_duration: float, ending: _Ending
) -> AsyncIterator[bytes]:
    """SSE bytes: ``retry:`` first, then each batch as one write (an empty one: keepalive).

    After ``max_duration`` the stream ends between two events; the client reconnects after
    ``retry:`` and resumes from its last event id. After the terminal event it ends when
    ``ending`` lets it."""
    yield f"retry: {retry_ms}\n\n".encode()
    until = asyncio.get_running_loop().time() + max_duration
    try:
        async with contextlib.aclosing(tail.follow(job_id, cursor, until=until)) as batches:
            async for batch in batches:
                if not batch:
                    yield KEEPALIVE
                    continue
                if batch[-1].terminal:
                    ending.begin()
                yield batch[0].sse if len(batch) == 1 else b"".join([e.sse for e in batch])
    except ViewerLagged:
        return  # the client reconnects with Last-Event-ID and catches up from Redis
    except CursorRefused:
        yield REFUSED
        return
    if ending.turn is not None:
        ending.release()
        await ending.turn
