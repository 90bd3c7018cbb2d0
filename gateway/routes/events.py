"""The SSE route: a generation's events, resumable, fed by the shared tail.

``id:`` is the stream entry id, ``event:`` the type, ``data:`` JSON. The cursor is the later of
``Last-Event-ID`` (sent by a reconnecting EventSource) and ``?after=``. The stream ends after
the terminal event; a request whose cursor is already there gets 204, which stops EventSource
from reconnecting. A client that goes away only stops watching: the generation goes on.

What one client may hold: a cursor must be an entry id in ASCII digits (400 otherwise), and one
past the stream's newest entry is clamped to it; and the rule of every stream
(:mod:`gateway.streaming.sse`): a tenant holds at most ``tenant_max_streams`` streams per
gateway process (429 beyond), a client that does not take a write for ``sse_send_timeout`` is
dropped, and every stream ends cleanly after ``sse_max_duration``, when its client resumes from
its ``Last-Event-ID``. So does a stream whose backfill Redis failed to answer (the pool busy
for its whole wait in a reconnect storm, say): the response has begun, so it cannot be a 503.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query, Response
from redis.exceptions import RedisError

from genq import TERMINAL, CursorRefused, Tail, ViewerLagged, entry_order

from ..access.owned_jobs import OwnedJob, load_owned_job
from ..deps import GatewayDep, JobId, JobTenantDep
from ..errors import ERRORS
from ..streaming.cursors import later_cursor, parse_cursor
from ..streaming.frames import KEEPALIVE
from ..streaming.sse import Ending, stream_hold
from ..telemetry import viewed

log = logging.getLogger("gateway.events")

router = APIRouter(tags=["generations"], responses=ERRORS)

REFUSED = b": Redis refused this stream's cursor\n\n"


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
    with stream_hold(gateway, tenant) as hold:
        retry_ms = int(gateway.settings.sse_retry_ms * random.uniform(0.5, 1.5))
        tail = gateway.tails[owned.provider]
        stream = _stream(tail, job_id, cursor, retry_ms, hold.until, hold.ending)
        return hold.respond(viewed(owned.job, owned.queue.prefix, stream))


async def _start(owned: OwnedJob, cursor: str | None) -> tuple[bool, str | None]:
    """(already at the terminal event, the cursor to follow from).

    A cursor past the stream's newest entry names no event the client can have seen (a
    stream's ids only grow): it is clamped to that entry, so the client gets what comes next."""
    finished = owned.job.status in TERMINAL
    if cursor is None and not finished:
        return False, None
    last = await owned.queue.last_event(owned.job.id)
    newest = last.id if last else "0-0"
    past_end = cursor is not None and entry_order(cursor) >= entry_order(newest)
    if finished and (last is None or past_end):
        return True, cursor
    return False, newest if past_end else cursor


async def _stream(
    tail: Tail, job_id: str, cursor: str | None, retry_ms: int, until: float, ending: Ending
) -> AsyncIterator[bytes]:
    """SSE bytes: ``retry:`` first, then each batch as one write (an empty one: keepalive).

    At ``until`` (the event loop's time) the stream ends between two events; the client
    reconnects after ``retry:`` and resumes from its last event id. After the terminal event
    it ends when ``ending`` lets it."""
    yield f"retry: {retry_ms}\n\n".encode()
    try:
        async with contextlib.aclosing(tail.follow(job_id, cursor, until=until)) as batches:
            async for batch in batches:
                if not batch:
                    yield KEEPALIVE
                    continue
                if batch[-1].terminal:
                    ending.begin()
                yield batch[0].framed if len(batch) == 1 else b"".join([e.framed for e in batch])
    except ViewerLagged:
        return  # the client reconnects with Last-Event-ID and catches up from Redis
    except RedisError as exc:
        # A backfill that found the pool busy for its whole wait, or Redis gone: the response
        # has begun, so no 503 can be sent. A clean end, not a cut one: the client resumes
        # from its Last-Event-ID after ``retry:``, as after GENQ_SSE_MAX_DURATION.
        log.warning("ended an event stream of %s early: %s", job_id[:80], type(exc).__name__)
        return
    except CursorRefused:
        yield REFUSED
        return
    if ending.turn is not None:
        ending.release()
        await ending.turn
