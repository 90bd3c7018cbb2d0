"""The invariant check itself: it passes on a clean queue and names each kind of violation.

Every fault test relies on ``check_invariants``; a check that cannot fail would make all of them
hollow. Each case here breaks one invariant by editing Redis (or a viewer's log) after a clean
run, and expects the check to say so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from genq import ActiveJob, Event, Queue
from tests.faults.invariants import InvariantError, check_invariants, result_writer, tag

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def finished(redis, prefix: str) -> tuple[Queue, list[str], dict[str, list[Event]]]:
    """Two completed jobs (one with an idempotency key) and one waiting job, with their views."""
    queue = Queue(redis, prefix, result_ttl=30.0)

    async def handler(job: ActiveJob) -> dict[str, Any]:
        await job.emit("W#1:tok1 ")
        await job.emit("W#1:tok2 ")
        job.meter("W", {"completion_tokens": 2})
        return {"text": "W#1:tok1 W#1:tok2 ", "writer": "W#1"}

    done = [(await queue.enqueue({}, idempotency_key="key-a")).id, (await queue.enqueue({})).id]
    async with queue.worker(handler, concurrency=2):
        for job_id in done:
            await queue.wait(job_id, timeout=5)
    waiting = (await queue.enqueue({})).id
    views = {job_id: [e async for e in queue.watch(job_id)] for job_id in done}
    return queue, [*done, waiting], views


async def check(queue: Queue, ids: list[str], views: dict[str, list[Event]]) -> None:
    await check_invariants(
        queue,
        ids,
        views={job_id: [view] for job_id, view in views.items()},
        settled=False,
        writer_of=tag,
        result_writer=result_writer,
    )


async def test_invariants_hold_on_a_clean_run(finished) -> None:
    queue, ids, views = finished
    await check(queue, ids, views)


Tamper = Callable[[Queue, list[str], dict[str, list[Event]]], Awaitable[Any]]


async def lose_a_job(queue: Queue, ids: list[str], views: Any) -> None:
    await queue.redis.delete(queue.keys.job(ids[2]))


async def settle_twice(queue: Queue, ids: list[str], views: Any) -> None:
    await queue.redis.xadd(queue.keys.events(ids[0]), {"type": "completed", "data": "{}"})


async def two_live_holders(queue: Queue, ids: list[str], views: Any) -> None:
    await queue.redis.zadd(queue.keys.scheduled, {ids[2]: 1})  # in ready and scheduled


async def accept_a_stale_write(queue: Queue, ids: list[str], views: Any) -> None:
    stream = queue.keys.events(ids[1])
    entries = await queue.redis.xrange(stream)
    await queue.redis.delete(stream)
    for _, fields in entries[:-1]:
        await queue.redis.xadd(stream, fields)
    await queue.redis.xadd(stream, {"type": "chunk", "data": '"Z#1:late "'})
    await queue.redis.xadd(stream, entries[-1][1])
    await queue.redis.pexpire(stream, 30_000)


async def show_duplicate_text(queue: Queue, ids: list[str], views: Any) -> None:
    view = views[ids[0]]
    replayed = [view[0], *view]  # a resume that replayed the first chunk: ids renumbered, so
    view[:] = [Event(f"{n + 1}-0", e.type, e.data) for n, e in enumerate(replayed)]  # in order


async def leave_an_orphan_key(queue: Queue, ids: list[str], views: Any) -> None:
    await queue.redis.xadd(queue.keys.events("ghost"), {"type": "chunk", "data": '"x"'})


async def keep_a_finished_record_forever(queue: Queue, ids: list[str], views: Any) -> None:
    await queue.redis.persist(queue.keys.job(ids[1]))


async def bind_a_key_to_nothing(queue: Queue, ids: list[str], views: Any) -> None:
    await queue.redis.set(queue.keys.idempotency("dangling"), "no-such-job")


async def count_an_attempt_twice(queue: Queue, ids: list[str], views: Any) -> None:
    await queue.redis.hincrby(queue.keys.usage_total, "\0W\0completion_tokens", 2)


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (lose_a_job, "lost"),
        (settle_twice, "settled 2 times"),
        (two_live_holders, "several sets"),
        (accept_a_stale_write, "stale holder"),
        (show_duplicate_text, "a viewer shows"),
        (leave_an_orphan_key, "orphan key"),
        (keep_a_finished_record_forever, "never expires"),
        (bind_a_key_to_nothing, "missing job"),
        (count_an_attempt_twice, "usage counters"),
    ],
)
async def test_invariants_name_each_violation(finished, tamper: Tamper, message: str) -> None:
    queue, ids, views = finished
    await tamper(queue, ids, views)
    with pytest.raises(InvariantError, match=message):
        await check(queue, ids, views)


async def test_retention_check_waits_for_expiry_and_finds_leftovers(redis, prefix: str) -> None:
    # The record must outlive the worker's stop and the check's first read (on a loaded CI
    # machine a stop took longer than 0.3 s), and expire well within the retention.
    queue = Queue(redis, prefix, result_ttl=1.5)

    async def handler(job: ActiveJob) -> str:
        await job.emit("x")
        return "x"

    job = await queue.enqueue({}, idempotency_key="short-lived")
    async with queue.worker(handler):
        await queue.wait(job.id, timeout=5)
    audit = await check_invariants(queue, [job.id], retention=5.0)
    assert audit.count("completed") == 1
    assert not await redis.exists(queue.keys.job(job.id), queue.keys.events(job.id))
    assert not await redis.exists(queue.keys.idempotency("short-lived"))

    second = await queue.enqueue({})
    async with queue.worker(handler):
        await queue.wait(second.id, timeout=5)
    await redis.persist(queue.keys.events(second.id))
    with pytest.raises(InvariantError, match="never expires"):
        await check_invariants(queue, [second.id], retention=0.5)
    await asyncio.sleep(0)
