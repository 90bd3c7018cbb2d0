import asyncio
import time

from genq import JobStatus


async def _run_order(queue, count):
    seen = []
    done = asyncio.Event()

    async def handler(job):
        seen.append(job.payload)
        if len(seen) == count:
            done.set()

    async with queue.worker(handler, concurrency=1):
        await asyncio.wait_for(done.wait(), 10)
    return seen


async def test_ordering_higher_priority_first_fifo_within(queue):
    for name, prio in [("a0", 0), ("b9", 9), ("c0", 0), ("d5", 5), ("e9", 9), ("f-3", -3)]:
        await queue.enqueue(name, priority=prio)
    assert await _run_order(queue, 6) == ["b9", "e9", "d5", "a0", "c0", "f-3"]


async def test_ordering_delayed_job_waits_until_due(queue):
    started = {}

    async def handler(job):
        started[job.payload] = time.monotonic() - t0

    # The worker runs first, so "now" is picked at its enqueue, not when a slow start lets
    # both jobs be due at once (then either may go first).
    async with queue.worker(handler, concurrency=2):
        t0 = time.monotonic()
        late = await queue.enqueue("late", delay=1.0)
        assert (await queue.get(late.id)).status is JobStatus.SCHEDULED
        assert (await queue.stats()).scheduled == 1
        now = await queue.enqueue("now")
        assert await queue.wait(now.id, timeout=10) is None
        assert await queue.wait(late.id, timeout=10) is None
    assert started["now"] < started["late"]
    assert started["late"] >= 1.0


async def test_ordering_delayed_high_priority_keeps_priority_when_due(queue):
    await queue.enqueue("low", priority=0)
    await queue.enqueue("high-delayed", priority=9, delay=0.2)
    await asyncio.sleep(0.3)
    assert await _run_order(queue, 2) == ["high-delayed", "low"]


async def test_ordering_concurrency_is_bounded(queue):
    running = 0
    peak = 0
    for i in range(12):
        await queue.enqueue(i)

    async def handler(job):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1

    async with queue.worker(handler, concurrency=3):
        for _ in range(200):
            s = await queue.stats()
            if s.waiting == 0 and s.active == 0:
                break
            await asyncio.sleep(0.05)
    assert peak == 3
