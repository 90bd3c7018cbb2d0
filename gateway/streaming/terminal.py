"""Waiting for a generation's end on the shared tail: the result route and the OpenAI routes'
non-streamed calls wait here, holding no Redis connection while they do."""

from __future__ import annotations

import asyncio
import contextlib

from genq import TERMINAL, Event, Job, Tail, cancel_and_wait

from ..access.owned_jobs import OwnedJob
from ..errors import NotFound
from ..state import Gateway


async def _until_terminal(tail: Tail, job_id: str, last: Event | None) -> None:
    async with contextlib.aclosing(tail.follow(job_id, last.id if last else "0-0")) as batches:
        async for batch in batches:
            if batch and batch[-1].terminal:
                return


async def wait_for_end(gateway: Gateway, owned: OwnedJob, timeout: float) -> Job:
    """Waits on the shared tail (no Redis connection held) for the terminal event. The
    caller holds a wait hold (``gateway.open_waits``), taken before anything it did first."""
    if owned.job.status in TERMINAL or timeout <= 0:
        return owned.job
    queue, job_id = owned.queue, owned.job.id
    last = await queue.last_event(job_id)
    if last is None or not last.terminal:  # else it finished since the record was read
        tail = gateway.tails[owned.provider]
        waiter = asyncio.create_task(_until_terminal(tail, job_id, last))
        try:
            await asyncio.wait({waiter}, timeout=timeout)
        finally:
            await cancel_and_wait(waiter)
    job = await queue.get(job_id)
    if job is None:
        raise NotFound("generation not found")
    return job
