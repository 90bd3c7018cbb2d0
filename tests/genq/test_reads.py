"""Queue reads the gateway builds on: the newest event of a stream, reads on the server clock."""

import time

from genq import TerminalJobError


async def test_last_event_is_the_newest_on_the_stream_or_none(queue):
    e = await queue.enqueue("p")
    assert await queue.last_event(e.id) is None  # nothing written yet

    async def handler(job):
        await job.emit("one")
        await job.emit("two")
        return {"answer": 42}

    async with queue.worker(handler):
        await queue.wait(e.id, timeout=5)
    every = [ev async for ev in queue.watch(e.id)]
    last = await queue.last_event(e.id)
    assert last == every[-1]
    assert (last.type, last.data, last.terminal) == ("completed", {"answer": 42}, True)
    assert await queue.last_event("never-enqueued") is None


async def test_last_event_of_a_failed_job_carries_the_error(queue):
    e = await queue.enqueue("p", max_attempts=1)

    async def handler(job):
        await job.emit("partial")
        raise TerminalJobError("provider said 400")

    async with queue.worker(handler):
        async for _ in queue.watch(e.id):
            pass
    last = await queue.last_event(e.id)
    assert (last.type, last.data) == ("failed", "provider said 400")


async def test_read_with_time_returns_the_replies_and_the_server_clock(queue, redis):
    await redis.hset(queue.keys.extra("probe"), mapping={"a": "1"})
    before = time.time()

    def fill(pipe):
        pipe.hgetall(queue.keys.extra("probe"))
        pipe.zcard(queue.keys.ready)

    replies, now = await queue.read_with_time(fill)
    assert replies == [{b"a": b"1"}, 0]
    seconds, micros = await redis.time()
    assert abs(now - (seconds + micros / 1e6)) < 1.0  # the server's clock
    assert abs(now - before) < 5.0
