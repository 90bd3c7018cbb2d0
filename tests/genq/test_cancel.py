import asyncio

import pytest

from genq import JobCancelledError, JobStatus, Queue, RetryJobError


async def test_cancel_waiting_job_settles_at_once(queue):
    e = await queue.enqueue("p", idempotency_key="k")
    assert await queue.cancel(e.id) is True
    job = await queue.get(e.id)
    assert job.status is JobStatus.CANCELLED and job.cancel_requested and job.finished_at
    assert [ev.type async for ev in queue.watch(e.id)] == ["cancelled"]
    assert (await queue.stats()).waiting == 0
    with pytest.raises(JobCancelledError):
        await queue.wait(e.id, timeout=1)
    ttl = await queue.redis.pttl(queue.keys.job(e.id))
    assert 0 < ttl <= 60_000


async def test_cancel_scheduled_job_leaves_schedule(queue):
    e = await queue.enqueue("p", delay=30)
    assert await queue.cancel(e.id)
    assert (await queue.stats()).scheduled == 0
    assert (await queue.get(e.id)).status is JobStatus.CANCELLED


async def test_cancel_running_job_sets_signal_and_cancels_handler(queue):
    e = await queue.enqueue("p")
    started = asyncio.Event()
    outcome = {}

    async def handler(job):
        await job.emit("partial ")
        started.set()
        try:
            await asyncio.sleep(30)  # an awaited provider call that never emits
        except asyncio.CancelledError:
            outcome["signal"] = job.signal.is_set()
            raise

    async with queue.worker(handler):
        await asyncio.wait_for(started.wait(), 5)
        assert await queue.cancel(e.id) is True
        assert (await queue.get(e.id)).cancel_requested
        with pytest.raises(JobCancelledError):
            await queue.wait(e.id, timeout=5)  # the cancels channel wakes the worker at once
    assert outcome == {"signal": True}
    events = [ev.type async for ev in queue.watch(e.id)]
    assert events == ["chunk", "cancelled"]


async def test_cancel_published_while_the_channel_was_down_is_seen_when_it_is_back(redis, prefix):
    """The cancel message finds no subscriber (the worker's channel connection was cut); once
    the channel is back the running job's heartbeat looks at once, not a heartbeat later."""
    queue = Queue(redis, prefix, lease=120.0, result_ttl=60.0)
    e = await queue.enqueue("p")
    started = asyncio.Event()

    async def handler(job):
        started.set()
        await asyncio.sleep(60)  # an awaited provider call that never emits

    async with queue.worker(handler, heartbeat=30.0):
        await asyncio.wait_for(started.wait(), 5)
        async with asyncio.timeout(5):  # its cancel channel subscribes in a task of its own
            while not await redis.client_list(_type="pubsub"):
                await asyncio.sleep(0.01)
        assert await redis.client_kill_filter(_type="pubsub") >= 1
        assert await queue.cancel(e.id) is True  # published to nobody
        with pytest.raises(JobCancelledError):
            await queue.wait(e.id, timeout=10)  # without the look on resubscribe: 30 s


async def test_cancel_stops_emitting_handler_at_next_emit(queue):
    e = await queue.enqueue("p")
    emitted = []
    started = asyncio.Event()

    async def handler(job):
        for i in range(1000):
            await job.emit(f"t{i}")
            emitted.append(i)
            if i == 2:
                started.set()
            await asyncio.sleep(0.01)
        return "too late"

    async with queue.worker(handler):
        await asyncio.wait_for(started.wait(), 5)
        await queue.cancel(e.id)
        at_cancel = len(emitted)
        with pytest.raises(JobCancelledError):
            await queue.wait(e.id, timeout=5)
    assert len(emitted) <= at_cancel + 1


async def test_cancel_wins_over_a_later_return_or_retry(queue):
    returned = await queue.enqueue("returns")
    retries = await queue.enqueue("retries")
    gate = asyncio.Event()
    started = []

    async def handler(job):
        started.append(job.payload)
        try:
            await gate.wait()
        except asyncio.CancelledError:
            pass  # a handler that swallows the cancel and carries on
        if job.payload == "retries":
            raise RetryJobError("flaky")
        return "result nobody wants"

    async with queue.worker(handler, concurrency=2):
        while len(started) < 2:
            await asyncio.sleep(0.01)
        assert await queue.cancel(returned.id) and await queue.cancel(retries.id)
        gate.set()
        for e in (returned, retries):
            with pytest.raises(JobCancelledError):
                await queue.wait(e.id, timeout=5)
    for e in (returned, retries):
        job = await queue.get(e.id)
        assert job.status is JobStatus.CANCELLED and job.result is None and job.attempt == 1


async def test_cancel_finished_or_unknown_returns_false(queue):
    e = await queue.enqueue("p")

    async def handler(job):
        return "done"

    async with queue.worker(handler):
        await queue.wait(e.id, timeout=5)
    assert await queue.cancel(e.id) is False
    assert await queue.cancel("unknown") is False
    assert (await queue.get(e.id)).status is JobStatus.COMPLETED


async def test_cancel_racing_completion_200_times(queue):
    """Never both a result and `cancelled`; a True from cancel always ends cancelled."""
    ids = [(await queue.enqueue(i)).id for i in range(200)]

    running = asyncio.Event()

    async def handler(job):
        running.set()
        await asyncio.sleep(0.001 * (job.payload % 7))
        await job.emit("x")
        return job.payload

    true_ids = set()
    connections = asyncio.Semaphore(40)  # the client's pool holds 100 connections

    async def cancel_later(job_id, i):
        await asyncio.sleep(0.0005 * (i % 11))
        async with connections:
            if await queue.cancel(job_id):
                true_ids.add(job_id)

    async with queue.worker(handler, concurrency=20):
        await asyncio.wait_for(running.wait(), 10)  # the race starts with jobs running
        await asyncio.gather(*[cancel_later(j, i) for i, j in enumerate(ids)])
        outcomes = {}
        for job_id in ids:
            try:
                outcomes[job_id] = ("completed", await queue.wait(job_id, timeout=10))
            except JobCancelledError:
                outcomes[job_id] = ("cancelled", None)
    for job_id in ids:
        job = await queue.get(job_id)
        terminal = [ev.type async for ev in queue.watch(job_id) if ev.terminal]
        assert len(terminal) == 1
        if job_id in true_ids:
            assert job.status is JobStatus.CANCELLED and job.result is None
            assert outcomes[job_id][0] == "cancelled" and terminal == ["cancelled"]
        else:
            assert job.status is JobStatus.COMPLETED and terminal == ["completed"]
    assert 0 < len(true_ids) < 200  # the race really happened both ways
