"""What callers outside genq read of a queue's keys, through genq: job states and bound jobs
across queues, existence, the cancel flag, the doorbell, named counters, live dead letters."""

from __future__ import annotations

import asyncio

from genq import (
    ActiveJob,
    DeadLetterWatch,
    JobStatus,
    Queue,
    TerminalJobError,
    bound_jobs,
    job_states,
)


async def test_job_lookups_states_span_queues_in_order(queue: Queue) -> None:
    other = queue.sibling(f"{queue.prefix}-other")
    done = await other.enqueue({"n": 1})
    assert await other.cancel(done.id)
    waiting = await queue.enqueue({"n": 2})
    states = await job_states([(queue, waiting.id), (other, done.id), (queue, done.id)])
    assert [s.status if s else None for s in states] == [
        JobStatus.WAITING,
        JobStatus.CANCELLED,
        None,
    ]
    assert states[0] and states[0].finished_at is None
    assert states[1] and states[1].finished_at
    assert await job_states([]) == []


async def test_job_lookups_bound_jobs_take_the_first_queue_holding_one(queue: Queue) -> None:
    other = queue.sibling(f"{queue.prefix}-other")
    theirs = await other.enqueue({"n": 1}, idempotency_key="k")
    ours = await queue.enqueue({"n": 2}, idempotency_key="k")
    only = await other.enqueue({"n": 3}, idempotency_key="only")
    found = await bound_jobs([queue, other], ["k", "only", "none"])
    assert {key: job.id for key, job in found.items()} == {"k": ours.id, "only": only.id}
    found = await bound_jobs([other, queue], ["k"])
    assert found["k"].id == theirs.id


async def test_job_lookups_existing_keeps_the_order_given(queue: Queue) -> None:
    first, second = await queue.enqueue({}), await queue.enqueue({})
    assert await queue.existing([second.id, "nope", first.id]) == [second.id, first.id]
    assert await queue.existing([]) == []


async def test_job_lookups_cancel_requested_of_a_running_job(queue: Queue) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def handler(job: ActiveJob) -> None:
        started.set()
        await release.wait()

    job = await queue.enqueue({})
    async with queue.worker(handler):
        await started.wait()
        assert not await queue.cancel_requested(job.id)
        await queue.cancel(job.id)
        assert await queue.cancel_requested(job.id)
        release.set()


async def test_job_lookups_doorbell_hears_a_wake(queue: Queue) -> None:
    bell = queue.doorbell(0.2)
    try:
        assert not await bell.wait()
        await queue.wake()
        assert await bell.wait()
    finally:
        await bell.aclose()


async def test_job_lookups_named_counters_count(queue: Queue) -> None:
    assert await queue.counter("hits") == 0
    assert [await queue.count("hits") for _ in range(3)] == [1, 2, 3]
    assert await queue.counter("hits") == 3
    assert queue.extra_key("hits").startswith(queue.keys.tag + ":x:")


async def test_job_lookups_dead_letter_watch_hears_each_queue(queue: Queue) -> None:
    other = queue.sibling(f"{queue.prefix}-other")

    async def fail(job: ActiveJob) -> None:
        raise TerminalJobError("no")

    async with DeadLetterWatch([queue, other]) as watch:
        job = await other.enqueue({})
        async with other.worker(fail):
            heard, notice = await asyncio.wait_for(anext(watch), 10)
    assert heard is other and notice["id"] == job.id and notice["reason"] == "terminal"
