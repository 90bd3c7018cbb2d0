"""The SSE route: a generation's events, resumable, fed by the shared tail.

``id:`` is the stream entry id, ``event:`` the type, ``data:`` JSON. The cursor is the later of
``Last-Event-ID`` (sent by a reconnecting EventSource) and ``?after=``. The stream ends after
the terminal event; a request whose cursor is already there gets 204, which stops EventSource
from reconnecting. A client that goes away only stops watching: the generation goes on.
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query, Response
from sse_starlette import EventSourceResponse

from genq import TERMINAL

from ..deps import GatewayDep, JobId, JobTenantDep, load_owned_job
from ..errors import BadRequest
from ..schemas import ERRORS
from ..tail import Entry, Tail, ViewerLagged, order_of

router = APIRouter(tags=["generations"], responses=ERRORS)

KEEPALIVE = b": ping\n\n"
_EVENT_ID = re.compile(r"^(0|\d{1,20}-\d{1,20})$")
_MAX_ID_PART = 2**64 - 1


def parse_cursor(value: str | None, source: str) -> str | None:
    """A stream entry id (``<ms>-<seq>``, or ``0`` for the start); 400 for anything else."""
    if value is None or value == "":
        return None
    if not _EVENT_ID.match(value) or any(int(p) > _MAX_ID_PART for p in value.split("-")):
        raise BadRequest(f"malformed {source} {value[:60]!r}: expected an event id '<ms>-<seq>'")
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
    if owned.job.status in TERMINAL:
        queue = owned.queue
        raw = await queue.redis.xrevrange(queue.keys.events(job_id), count=1)
        last = Entry.from_redis(*raw[0]) if raw else None
        if last is None or (cursor is not None and order_of(cursor) >= last.order):
            return Response(status_code=204)
    retry_ms = int(gateway.settings.sse_retry_ms * random.uniform(0.5, 1.5))
    # ping=0: the shared tail already sends keepalives, only to quiet streams and spread out.
    return EventSourceResponse(
        _stream(gateway.tails[owned.provider], job_id, cursor, retry_ms),
        ping=0,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _stream(
    tail: Tail, job_id: str, cursor: str | None, retry_ms: int
) -> AsyncIterator[bytes]:
    """SSE bytes: ``retry:`` first, then each batch as one write (an empty one: keepalive)."""
    yield f"retry: {retry_ms}\n\n".encode()
    try:
        async with contextlib.aclosing(tail.follow(job_id, cursor)) as batches:
            async for batch in batches:
                if not batch:
                    yield KEEPALIVE
                else:
                    yield batch[0].sse if len(batch) == 1 else b"".join([e.sse for e in batch])
    except ViewerLagged:
        return  # the client reconnects with Last-Event-ID and catches up from Redis
