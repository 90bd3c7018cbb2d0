"""A queue and an in-process worker on a ``redis+sentinel://`` URL keep working across a
SIGKILL of the primary: the generation in flight finishes on the promoted replica, the
worker's doorbell (a BLPOP on a connection of its own) blocks again on the new primary, and a
job enqueued afterwards runs."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from genq import ActiveJob, Queue
from tests.failover.local_sentinel import LocalSentinel
from tests.failover.support import wait_blocked, worker_client

pytestmark = pytest.mark.timeout(90)

TOKENS = 30


async def slow_tokens(job: ActiveJob) -> dict[str, str]:
    for i in range(TOKENS):
        await job.emit(f"t{i} ")
        await asyncio.sleep(0.1)
    return {"text": "".join(f"t{i} " for i in range(TOKENS))}


async def test_queue_and_worker_carry_on_across_a_primary_kill(fresh: LocalSentinel) -> None:
    client = worker_client(fresh.url())
    queue = Queue(client, prefix=f"failover-{uuid.uuid4().hex[:8]}", lease=15.0)
    try:
        async with queue.worker(slow_tokens, concurrency=4, poll=1.0):
            await wait_blocked(fresh, "blpop")  # the doorbell, on the first primary
            first = await queue.enqueue({"prompt": "before"})
            async with asyncio.timeout(10):
                while (await queue.last_event(first.id)) is None:
                    await asyncio.sleep(0.05)

            fresh.kill_primary()
            started = time.monotonic()
            await asyncio.to_thread(fresh.wait_failover)
            print(f"failover took {time.monotonic() - started:.2f}s")

            assert (await queue.wait(first.id, timeout=30))["text"].startswith("t0 t1 ")
            await wait_blocked(fresh, "blpop")  # the doorbell found the new primary
            after = await queue.enqueue({"prompt": "after"})
            assert (await queue.wait(after.id, timeout=30))["text"].endswith(f"t{TOKENS - 1} ")
            events = [e.type async for e in queue.watch(first.id)]
            assert events[-1] == "completed"
    finally:
        await client.aclose()
