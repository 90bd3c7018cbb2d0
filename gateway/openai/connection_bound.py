"""How long an OpenAI request's generation lives, measured against its connection.

A generation asked for with ``background: true`` or an ``Idempotency-Key`` outlives its
request: the client may go and come back (poll, resume, or POST again with the same key). Any
other one is tied to its connection, as OpenAI's non-background requests are: a client that
disconnects before the end cancels it, so the provider stops (and stops billing) at once. So
does a stream the gateway ends first (its max duration, a send timeout, a shutdown: see
:mod:`gateway.streaming.sse`): nobody could read the rest of an unbound generation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

from fastapi import Request

from genq import TERMINAL, Job, ViewerLagged

from ..access.owned_jobs import OwnedJob
from ..state import Gateway
from ..streaming.disconnect import unless_disconnected
from ..streaming.terminal import wait_for_end

_cancels: set[asyncio.Task[bool]] = set()

CUT = (
    "the stream ended before the generation did (it reached the gateway's "
    "GENQ_SSE_MAX_DURATION, or the gateway is stopping)"
)
"""The start of what a stream's last message says when :class:`StreamCut` ends it."""


class StreamCut(Exception):
    """Raised by a stream's content that ended before its generation did (``until`` came, the
    shared tail closed), once it told its client so."""


def cancel_soon(owned: OwnedJob) -> None:
    """Cancels the job from a task of its own: the caller is itself being cancelled."""
    task = asyncio.get_running_loop().create_task(owned.queue.cancel(owned.job.id))
    _cancels.add(task)
    task.add_done_callback(_cancels.discard)


async def tied(
    stream: AsyncGenerator[bytes, None], owned: OwnedJob, cancel: bool
) -> AsyncIterator[bytes]:
    """``stream``, ending quietly when the viewer lags (the client resumes); when ``cancel``,
    a stream left or cut (:class:`StreamCut`) before its end cancels the generation."""
    finished = False
    try:
        async with contextlib.aclosing(stream):
            async for chunk in stream:
                yield chunk
        finished = True
    except ViewerLagged:
        finished = True
    except StreamCut:
        pass  # its client was told; the response ends normally
    finally:
        if cancel and not finished:
            cancel_soon(owned)


async def until_terminal(gateway: Gateway, owned: OwnedJob) -> Job:
    """Waits on the shared tail, however long, for the job to finish (the caller holds a wait
    hold, taken before it enqueued)."""
    job = owned.job
    while job.status not in TERMINAL:
        job = await wait_for_end(
            gateway, OwnedJob(owned.provider, owned.queue, job), gateway.settings.max_wait
        )
    return job


async def end_or_leave(
    request: Request, gateway: Gateway, owned: OwnedJob, cancel: bool
) -> Job | None:
    """The finished job, or None when the client left first (which cancels it if ``cancel``)."""
    finished, job = await unless_disconnected(request, until_terminal(gateway, owned))
    if finished and job is not None:
        return job
    if cancel:
        await owned.queue.cancel(owned.job.id)
    return None
