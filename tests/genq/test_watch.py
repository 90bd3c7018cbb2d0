import asyncio

import pytest
from redis import asyncio as aioredis

from genq import JobCancelledError, JobFailedError, JobNotFoundError, Queue, TerminalJobError
from tests.genq.streams import entry_id


async def _finished_job(queue, chunks=8):
    e = await queue.enqueue("p")

    async def handler(job):
        for i in range(chunks):
            await job.emit(f"c{i}")
        return "done"

    async with queue.worker(handler):
        await queue.wait(e.id, timeout=10)
    return e.id


async def test_watch_resume_from_every_cursor_has_no_gap_and_no_duplicate(queue):
    job_id = await _finished_job(queue)
    full = [ev async for ev in queue.watch(job_id)]
    assert [ev.type for ev in full] == ["chunk"] * 8 + ["completed"]
    ids = [entry_id(ev.id) for ev in full]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for i, ev in enumerate(full):
        resumed = [e async for e in queue.watch(job_id, after=ev.id)]
        assert resumed == full[i + 1 :]


async def test_watch_live_sees_events_as_they_happen_and_ends(queue):
    e = await queue.enqueue("p")
    step = asyncio.Event()

    async def handler(job):
        await job.emit("one")
        await step.wait()
        await job.emit("two")
        return "end"

    seen = []

    async def watcher():
        async for ev in queue.watch(e.id):
            seen.append(ev.data)
            if ev.data == "one":
                step.set()

    async with queue.worker(handler):
        await asyncio.wait_for(watcher(), 10)
    assert seen == ["one", "two", "end"]


async def test_watch_resumed_live_mid_stream_does_not_repeat(queue):
    e = await queue.enqueue("p")
    gate = asyncio.Event()

    async def handler(job):
        await job.emit("a")
        await job.emit("b")
        await gate.wait()
        await job.emit("c")
        return "z"

    async with queue.worker(handler):
        first = []
        async for ev in queue.watch(e.id):
            first.append(ev)
            if ev.data == "b":
                break  # a dropped connection
        gate.set()
        rest = [ev async for ev in queue.watch(e.id, after=first[-1].id)]
    assert [ev.data for ev in first + rest] == ["a", "b", "c", "z"]


async def test_watch_cursor_at_terminal_event_ends_at_once(queue):
    job_id = await _finished_job(queue, chunks=2)
    last = [ev async for ev in queue.watch(job_id)][-1]
    assert last.type == "completed"
    assert [ev async for ev in queue.watch(job_id, after=last.id)] == []


async def test_watch_unknown_job_and_bad_cursor_raise(queue):
    with pytest.raises(JobNotFoundError):
        async for _ in queue.watch("missing"):
            pass
    e = await queue.enqueue("p")
    with pytest.raises(ValueError):
        async for _ in queue.watch(e.id, after="not-an-id"):
            pass


async def test_wait_finished_job_returns_at_once(queue):
    job_id = await _finished_job(queue, chunks=1)
    assert await asyncio.wait_for(queue.wait(job_id), 0.5) == "done"


async def test_wait_times_out_and_reports_outcomes(queue):
    waiting = await queue.enqueue("never runs")
    with pytest.raises(TimeoutError):
        await queue.wait(waiting.id, timeout=0.3)
    with pytest.raises(JobNotFoundError):
        await queue.wait("missing", timeout=1)
    assert await queue.cancel(waiting.id)
    with pytest.raises(JobCancelledError):
        await queue.wait(waiting.id, timeout=1)

    failing = await queue.enqueue("fails")

    async def handler(job):
        raise TerminalJobError("no")

    async with queue.worker(handler):
        with pytest.raises(JobFailedError) as info:
            await queue.wait(failing.id, timeout=5)
    assert info.value.error == "no"


async def test_wait_sees_completion_that_races_its_start(queue):
    """Many waiters that start while jobs finish never hang on an event that passed."""
    ids = [(await queue.enqueue(i)).id for i in range(40)]

    async def handler(job):
        return job.payload * 2

    async with queue.worker(handler, concurrency=10):
        results = await asyncio.wait_for(asyncio.gather(*[queue.wait(i) for i in ids]), 20)
    assert results == [i * 2 for i in range(40)]


async def test_watch_and_wait_ride_out_their_connections_closed_by_the_server(
    redis_url: str, prefix: str
) -> None:
    """A failover closes the connections of a master that turns replica: a watcher or waiter
    blocked in its XREAD reads again from its cursor instead of failing."""
    name = f"watcher-{prefix}"
    watched = Queue(aioredis.Redis.from_url(redis_url, client_name=name), prefix, lease=5.0)
    admin = aioredis.Redis.from_url(redis_url)
    try:
        e = await watched.enqueue("p")
        waiter = asyncio.create_task(watched.wait(e.id, timeout=20))
        events = asyncio.create_task(_collect(watched.watch(e.id)))

        async def blocked() -> list[str]:
            return [
                c["id"]
                for c in await admin.client_list()
                if c.get("name") == name and c.get("cmd") == "xread" and "b" in c["flags"]
            ]

        async with asyncio.timeout(5):
            while len(readers := await blocked()) < 2:
                await asyncio.sleep(0.01)
        for reader in readers:
            assert await admin.client_kill_filter(_id=reader) == 1

        async def handler(job):
            await job.emit("one")
            return "done"

        async with watched.worker(handler):
            assert await asyncio.wait_for(waiter, 20) == "done"
            assert [ev.data for ev in await asyncio.wait_for(events, 20)] == ["one", "done"]
    finally:
        await watched.redis.aclose()
        await admin.aclose()


async def _collect(events):
    return [ev async for ev in events]
