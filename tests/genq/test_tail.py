"""The shared tail (genq.Tail) against a real Redis: no gap, no duplicate, one reader
connection."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from genq import CursorRefused, Queue, ReaderLink, StreamEntry, Tail, ViewerLagged


class TailRig:
    def __init__(self, redis_url: str, prefix: str, **options: Any) -> None:
        self.pool_name = f"tailpool-{prefix}"
        self.reader_name = f"tailreader-{prefix}"
        pool = BlockingConnectionPool.from_url(
            redis_url, max_connections=4, client_name=self.pool_name
        )
        self.redis = Redis(connection_pool=pool)
        self.queue = Queue(self.redis, prefix)
        self.keys = self.queue.keys

        async def reader_link(slot_key: str) -> ReaderLink:
            reader = Redis.from_url(
                redis_url,
                single_connection_client=True,
                client_name=self.reader_name,
                retry=Retry(NoBackoff(), 0),
                socket_timeout=60,
            )
            return ReaderLink(reader, self.redis.client_unblock)

        self.tail = Tail(self.queue, reader_link, **options)

    async def append(self, job_id: str, kind: str = "chunk", data: object = "x") -> str:
        entry = await self.redis.xadd(
            self.keys.events(job_id), {"type": kind, "data": json.dumps(data)}
        )
        return str(entry.decode())

    async def clients(self, name: str) -> list[dict[str, str]]:
        return [c for c in await self.redis.client_list() if c.get("name") == name]


@contextlib.asynccontextmanager
async def rig(redis_url: str, prefix: str, **options: Any) -> AsyncIterator[TailRig]:
    made = TailRig(redis_url, prefix, **options)
    await made.tail.start()
    try:
        yield made
    finally:
        await made.tail.stop()
        await made.redis.aclose()
        await made.redis.connection_pool.aclose()


async def collect(tail: Tail, job_id: str, after: str | None = None) -> list[str]:
    seen: list[str] = []
    async for batch in tail.follow(job_id, after):
        seen.extend(entry.id for entry in batch)
    return seen


def suffix(ids: list[str], cursor: str | None) -> list[str]:
    return ids if cursor in (None, "0-0") else ids[ids.index(cursor) + 1 :]


async def reader_blocked(r: TailRig) -> None:
    """Waits until Redis shows the tail's reader blocked in its XREAD."""
    async with asyncio.timeout(5):
        while True:
            readers = await r.clients(r.reader_name)
            if readers and "b" in readers[0]["flags"]:
                return
            await asyncio.sleep(0.01)


async def test_tail_viewers_joining_at_any_cursor_see_each_entry_once(
    redis_url: str, prefix: str
) -> None:
    async with rig(redis_url, prefix) as r:
        ids: list[str] = []
        viewers: list[tuple[str | None, asyncio.Task[list[str]]]] = []
        rng = random.Random(7)
        for i in range(150):
            ids.append(await r.append("job", data=i))
            if i % 3 == 0:
                cursor = rng.choice([None, "0-0", *ids])
                viewers.append((cursor, asyncio.create_task(collect(r.tail, "job", cursor))))
            if rng.random() < 0.3:
                await asyncio.sleep(rng.choice([0, 0.001, 0.005]))
        ids.append(await r.append("job", "completed", {"text": "done"}))
        for cursor in rng.sample(ids[:-1], 5):  # late joiners, after the end
            viewers.append((cursor, asyncio.create_task(collect(r.tail, "job", cursor))))

        async with asyncio.timeout(10):
            for cursor, task in viewers:
                assert await task == suffix(ids, cursor), f"viewer from {cursor}"
        assert (r.tail.viewers, r.tail.streams) == (0, 0)


async def test_tail_new_stream_joins_a_blocked_read_at_once(redis_url: str, prefix: str) -> None:
    async with rig(redis_url, prefix, block=30) as r:
        first = asyncio.create_task(collect(r.tail, "first"))
        await reader_blocked(r)

        started = time.monotonic()
        second = asyncio.create_task(collect(r.tail, "second"))
        await asyncio.sleep(0)
        done = await r.append("second", "completed", None)
        assert await asyncio.wait_for(second, 5) == [done]
        assert time.monotonic() - started < 2, "the 30 s XREAD was not unblocked"

        await r.append("first", "cancelled", None)
        await asyncio.wait_for(first, 5)


async def test_tail_uses_one_reader_connection_for_many_viewers(
    redis_url: str, prefix: str
) -> None:
    async with rig(redis_url, prefix) as r:
        jobs = [f"job{i}" for i in range(20)]
        tasks = [asyncio.create_task(collect(r.tail, jobs[i % 20])) for i in range(200)]
        await asyncio.sleep(0)
        expected = {job: [await r.append(job, data=n) for n in range(3)] for job in jobs}
        await r.append(jobs[0], data="probe")  # let the reader catch up before counting
        await reader_blocked(r)

        assert r.tail.viewers == 200
        assert len(await r.clients(r.reader_name)) == 1
        assert len(await r.clients(r.pool_name)) <= 4

        for job in jobs:
            expected[job].append(await r.append(job, "completed", None))
        results = await asyncio.wait_for(asyncio.gather(*tasks), 10)
        for i, seen in enumerate(results):
            job = jobs[i % 20]
            assert [e for e in seen if e in expected[job]] == expected[job]
            assert len(seen) == len(set(seen))


async def test_tail_ends_viewers_of_a_vanished_job(redis_url: str, prefix: str) -> None:
    async with rig(redis_url, prefix, idle_check=0.2) as r:
        await r.redis.hset(r.keys.job("kept"), "status", "active")
        await r.redis.hset(r.keys.job("gone"), "status", "active")
        kept = asyncio.create_task(collect(r.tail, "kept"))
        gone = r.tail.follow("gone")
        first = await r.append("gone")
        assert [e.id for e in await anext(gone)] == [first]
        await r.redis.delete(r.keys.job("gone"), r.keys.events("gone"))

        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(anext(gone), 5)
        assert not kept.done()
        last = await r.append("kept", "completed", None)
        assert await asyncio.wait_for(kept, 5) == [last]


async def test_tail_reader_resumes_without_gap_after_its_connection_dies(
    redis_url: str, prefix: str
) -> None:
    async with rig(redis_url, prefix) as r:
        viewer = asyncio.create_task(collect(r.tail, "job"))
        ids = [await r.append("job", data=i) for i in range(5)]
        await reader_blocked(r)
        for client in await r.clients(r.reader_name):
            await r.redis.client_kill_filter(_id=client["id"])
        ids += [await r.append("job", data=i) for i in range(5, 10)]
        ids.append(await r.append("job", "completed", None))

        assert await asyncio.wait_for(viewer, 10) == ids


async def test_tail_viewer_that_falls_behind_is_told_to_resume(redis_url: str, prefix: str) -> None:
    async with rig(redis_url, prefix, max_lag=10) as r:
        follow = r.tail.follow("job")
        await r.append("job")
        first = await anext(follow)
        assert len(first) == 1
        for i in range(40):
            await r.append("job", data=i)
        await r.append("job", data="probe")
        with pytest.raises(ViewerLagged):
            async with asyncio.timeout(5):
                while True:
                    await anext(follow)
        await follow.aclose()
        assert r.tail.viewers == 0


async def test_tail_viewer_leaving_unsubscribes(redis_url: str, prefix: str) -> None:
    async with rig(redis_url, prefix) as r:
        await r.append("job")
        follow = r.tail.follow("job")
        await anext(follow)
        assert (r.tail.viewers, r.tail.streams) == (1, 1)
        await follow.aclose()
        assert (r.tail.viewers, r.tail.streams) == (0, 0)


async def test_tail_last_viewer_leaving_while_entries_flow_keeps_the_reader(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The last viewer leaves while the reader paces its reads (entries flowing): the reader
    goes back to waiting for viewers on the same connection, not to an XREAD of no stream
    (refused by redis-py, which dropped the connection and logged a failure)."""
    async with rig(redis_url, prefix, pace=0.05) as r:
        for round_ in range(5):
            job = f"job-{round_}"
            for n in range(3):
                await r.append(job, data=n)
            follow = r.tail.follow(job)
            await anext(follow)  # a read that found entries: the next one waits for the pace
            await follow.aclose()  # during the pace's sleep
            await asyncio.sleep(0.06)
        reader = await r.clients(r.reader_name)
        late = await r.append("late", "completed", None)
        assert await asyncio.wait_for(collect(r.tail, "late"), 5) == [late]
        assert [c["id"] for c in await r.clients(r.reader_name)] == [c["id"] for c in reader]
    assert not [rec for rec in caplog.records if "reader failed" in rec.getMessage()]


async def test_tail_viewer_cancelled_while_waiting_leaves_the_others_waiting(
    redis_url: str, prefix: str
) -> None:
    """Viewers of one stream wait on the channel together: one cancelled (its client gone)
    must neither wake nor cancel the others, and leaves the channel."""
    async with rig(redis_url, prefix) as r:
        await r.append("job")
        follows = [r.tail.follow("job") for _ in range(3)]
        for follow in follows:
            await anext(follow)
        waiting = [asyncio.create_task(anext(follow)) for follow in follows]
        await asyncio.sleep(0.05)
        waiting[1].cancel()
        await asyncio.sleep(0.05)
        assert not waiting[0].done() and not waiting[2].done()
        entry = await r.append("job")
        for task in (waiting[0], waiting[2]):
            assert [e.id for e in await asyncio.wait_for(task, 5)] == [entry]
        assert waiting[1].cancelled()
        for follow in follows:
            await follow.aclose()
        assert (r.tail.viewers, r.tail.streams) == (0, 0)


async def test_tail_quiet_stream_gets_keepalive_batches(redis_url: str, prefix: str) -> None:
    async with rig(redis_url, prefix, heartbeat=0.2) as r:
        follow = r.tail.follow("quiet")
        try:
            assert await asyncio.wait_for(anext(follow), 2) == []
            entry = await r.append("quiet")
            batch = await asyncio.wait_for(anext(follow), 2)
            assert [e.id for e in batch] == [entry]
        finally:
            await follow.aclose()


async def test_tail_viewer_ends_at_its_deadline_even_on_a_quiet_stream(
    redis_url: str, prefix: str
) -> None:
    async with rig(redis_url, prefix) as r:
        first = await r.append("job")
        loop = asyncio.get_running_loop()
        other = r.tail.follow("job")
        short = r.tail.follow("job", until=loop.time() + 0.3)
        try:
            assert [e.id for e in await anext(other)] == [first]
            assert [e.id for e in await anext(short)] == [first]
            started = loop.time()
            with pytest.raises(StopAsyncIteration):  # nothing new: the deadline alone ends it
                await asyncio.wait_for(anext(short), 2)
            assert 0.2 <= loop.time() - started < 1.5
            assert r.tail.viewers == 1, "the other viewer of the stream follows on"
            second = await r.append("job")
            assert [e.id for e in await asyncio.wait_for(anext(other), 2)] == [second]
        finally:
            await short.aclose()
            await other.aclose()


# -- issue 17: one viewer's cursor cannot stall the others -------------------------------------


async def test_tail_cursor_refused_by_redis_ends_only_its_stream(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 1, second wall: should a cursor Redis refuses ever get past validation, the
    shared XREAD fails; the tail finds the stream at fault and ends its viewers alone."""
    monkeypatch.setattr("genq._tail.check_cursor", lambda cursor: cursor)
    async with rig(redis_url, prefix) as r:
        await r.append("good")
        good = asyncio.create_task(collect(r.tail, "good"))
        await reader_blocked(r)

        with pytest.raises(CursorRefused):
            async with asyncio.timeout(5):
                await collect(r.tail, "bad", "\u0661-\u0661")

        await r.append("good")
        last = await r.append("good", "completed", None)
        seen = await asyncio.wait_for(good, 5)
        assert len(seen) == 3 and seen[-1] == last
        assert r.tail.streams == 0


async def test_tail_future_cursor_does_not_hide_entries_from_later_viewers(
    redis_url: str, prefix: str
) -> None:
    """Finding 7's cause: the first viewer's cursor became the shared read position, so a
    cursor past the stream's end hid every new entry from viewers that joined later."""
    async with rig(redis_url, prefix) as r:
        before = await r.append("job")
        future = asyncio.create_task(collect(r.tail, "job", "99999999999999-0"))
        await reader_blocked(r)
        later = asyncio.create_task(collect(r.tail, "job", before))
        await asyncio.sleep(0.05)
        ids = [await r.append("job"), await r.append("job", "completed", None)]

        assert await asyncio.wait_for(later, 5) == ids
        # Nothing after its own cursor exists: it ends with the stream, having seen nothing.
        assert await asyncio.wait_for(future, 5) == []


async def test_tail_frames_each_entry_once_for_every_viewer(redis_url: str, prefix: str) -> None:
    """The tail frames an entry (``frame``) once, whatever the number of its viewers, and
    every viewer gets the same bytes: the fan-out encodes nothing per viewer."""
    framed: list[str] = []

    def frame(entry: StreamEntry) -> bytes:
        framed.append(entry.id)
        return f"{entry.id} {entry.type} {entry.data}".encode()

    async with rig(redis_url, prefix, frame=frame) as r:
        early = await r.append("job", data="one")
        viewers = [r.tail.follow("job") for _ in range(3)]
        for follow in viewers:
            assert [e.framed for e in await anext(follow)] == [f'{early} chunk "one"'.encode()]
        late = r.tail.follow("job", "0-0")  # joins later: its backfill is framed too
        assert [e.id for e in await anext(late)] == [early]
        done = await r.append("job", "completed", {"text": "t"})
        batches = [await asyncio.wait_for(anext(f), 5) for f in [*viewers, late]]
        assert {id(b[0]) for b in batches} == {id(batches[0][0])}, "one object for all"
        assert batches[0][0].framed == f'{done} completed {{"text": "t"}}'.encode()
        assert framed.count(done) == 1
        for follow in [*viewers, late]:
            await follow.aclose()
