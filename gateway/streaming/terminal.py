"""Waiting for a generation's end on the shared tail: the result route, the OpenAI routes'
non-streamed calls and the Stops that answer once the generation stopped wait here, holding no
Redis connection while they do."""

from __future__ import annotations

import asyncio
import contextlib

from genq import TERMINAL, Event, Job, Tail, cancel_and_wait

from ..access.owned_jobs import OwnedJob
from ..errors import NotFound, RateLimited
from ..state import Gateway

CANCEL_SETTLE = 5.0
"""Seconds a Stop waits for a running generation's worker to stop it."""


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


async def settled(gateway: Gateway, owned: OwnedJob, tenant: str) -> Job:
    """The job once its worker stopped it after a cancel (``CANCEL_SETTLE`` at most), waited
    for in one of the tenant's wait holds; with none free, the job as it is: the cancel is done
    either way, and a 429 would say it was not."""
    if owned.job.status in TERMINAL:
        return owned.job
    try:
        release = gateway.open_waits.take(tenant)
    except RateLimited:
        return owned.job
    try:
        return await wait_for_end(gateway, owned, CANCEL_SETTLE)
    finally:
        release()
