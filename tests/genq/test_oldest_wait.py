"""``Queue.stats().oldest_wait``: the age of the job that has waited longest, whatever its place
in line (priority, tenant), counted from when it became runnable."""

from __future__ import annotations

import asyncio

from genq import Queue
from genq._reserve import pick


async def until_server_clock(queue: Queue, instant: float) -> float:
    """Waits until the server's clock (the one the scripts stamp) reads ``instant``."""
    async with asyncio.timeout(15):
        while (now := await queue.server_time()) < instant:
            await asyncio.sleep(0.02)
    return now


async def test_stats_oldest_wait_is_the_oldest_job_not_the_first_in_line(queue: Queue) -> None:
    low = await queue.enqueue("backlog", tenant="a")
    created = (await queue.get(low.id)).created_at
    await until_server_clock(queue, created + 1.5)
    for _ in range(3):
        await queue.enqueue("urgent", priority=9, tenant="a")
    stats = await queue.stats()  # the high ones still in the intake, the low one too
    assert 1.5 <= stats.oldest_wait < 60

    await queue.admit()  # now all in line, the high ones first
    stats = await queue.stats()
    assert stats.waiting == 4
    assert 1.5 <= stats.oldest_wait < 60

    # Served the high ones, then the low one: nothing waits, nothing is left to age.
    claimed, _, _ = await pick(queue, 3, "")
    assert low.id not in claimed
    assert 1.5 <= (await queue.stats()).oldest_wait < 60
    claimed, _, _ = await pick(queue, 1, "")
    assert claimed == [low.id]
    stats = await queue.stats()
    assert (stats.waiting, stats.oldest_wait) == (0, 0.0)
    assert await queue.redis.exists(queue.keys.waits) == 0


async def test_stats_oldest_wait_counts_a_delayed_job_from_when_it_was_due(queue: Queue) -> None:
    later = await queue.enqueue("later", delay=2.0)
    job = await queue.get(later.id)
    assert job.run_at is not None and job.run_at >= job.created_at + 2.0
    await until_server_clock(queue, job.run_at + 0.2)
    assert await pick(queue, 0, "") == ([], [], -1)  # promotes it, claims nothing
    before = await queue.server_time()
    stats = await queue.stats()
    after = await queue.server_time()
    assert stats.waiting == 1
    # Waiting since it was due, not since it was enqueued 2 s before that.
    assert before - job.run_at - 0.01 <= stats.oldest_wait <= after - job.run_at + 0.01
