"""Reading ahead: while a backlog of short jobs waits, a worker holds up to ``read_ahead`` jobs
started beyond its running ones, reserved in a task of its own, so a freed slot takes the next
job with no round trip and the server reserves the next ones while the worker runs these. Long
jobs are never read ahead; a job read ahead that waits past its hold, or is held at a stop,
goes back to the queue untouched (its attempt not counted), and one cancelled meanwhile settles
cancelled without running."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from genq import ActiveJob, EnqueueItem, JobStatus, Queue, _worker
from tests.faults.invariants import check_invariants


async def backlog(queue: Queue, n: int, **payload: Any) -> list[str]:
    jobs = await queue.enqueue_many([EnqueueItem({"i": i, **payload}) for i in range(n)])
    return [job.id for job in jobs]


async def held(queue: Queue) -> int:
    """Jobs held by workers: claimed or started (the lease set)."""
    return int(await queue.redis.zcard(queue.keys.leases))


def recording(ran: list[str], go_on: asyncio.Event) -> Callable[[ActiveJob], Awaitable[None]]:
    """A handler that notes each job it runs; a job whose payload says ``block`` runs until
    ``go_on`` is set."""

    async def handler(job: ActiveJob) -> None:
        ran.append(job.id)
        if job.payload.get("block"):
            await go_on.wait()

    return handler


@pytest.mark.parametrize("read_ahead", [None, 0])
async def test_a_backlog_of_short_jobs_is_read_ahead_and_each_job_runs_once(
    queue: Queue, read_ahead: int | None
) -> None:
    ids = await backlog(queue, 300)
    ran: list[tuple[str, int]] = []
    most_ahead = 0  # jobs the worker held started, waiting for a slot

    async def handler(job: ActiveJob) -> None:
        nonlocal most_ahead
        ran.append((job.id, job.attempt))
        most_ahead = max(most_ahead, len(worker._ahead))

    async with queue.worker(handler, concurrency=4, read_ahead=read_ahead) as worker:
        assert worker.read_ahead == (8 if read_ahead is None else 0)
        for job_id in ids:
            await queue.wait(job_id, timeout=30)
    assert sorted(ran) == sorted((job_id, 1) for job_id in ids)
    if read_ahead is None:
        assert 0 < most_ahead <= 8
    else:
        assert most_ahead == 0
    await check_invariants(queue, ids)


async def test_long_jobs_are_never_read_ahead(queue: Queue) -> None:
    ids = await backlog(queue, 12)
    most_ahead = 0

    async def handler(job: ActiveJob) -> None:
        nonlocal most_ahead
        await asyncio.sleep(2 * _worker.READ_AHEAD_BELOW)
        most_ahead = max(most_ahead, len(worker._ahead))

    async with queue.worker(handler, concurrency=2) as worker:
        for job_id in ids:
            await queue.wait(job_id, timeout=30)
    assert most_ahead == 0


async def test_jobs_read_ahead_go_back_untouched_once_they_wait_past_their_hold(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_worker, "READ_AHEAD_HOLD", 0.3)
    short = await backlog(queue, 60)
    slow = await backlog(queue, 3, block=True)
    go_on = asyncio.Event()
    started: list[str] = []

    async with queue.worker(recording(started, go_on), concurrency=1):
        async with asyncio.timeout(30):
            while slow[0] not in started:
                await asyncio.sleep(0.01)
            # The first slow job runs; the two behind it, read ahead while jobs were short,
            # wait past their hold and go back: ready again, their attempt not counted.
            while True:
                behind = [await queue.get(job_id) for job_id in slow[1:]]
                if all(j.status is JobStatus.WAITING for j in behind):
                    break
                await asyncio.sleep(0.02)
        assert [(j.attempt, j.history) for j in behind] == [(0, ()), (0, ())]
        await asyncio.sleep(0.5)  # no more are read ahead meanwhile: they stay in line
        assert [(await queue.get(job_id)).status for job_id in slow[1:]] == [JobStatus.WAITING] * 2
        go_on.set()
        for job_id in short + slow:
            await queue.wait(job_id, timeout=30)
    for job_id in short + slow:
        assert (await queue.get(job_id)).attempt == 1
    await check_invariants(queue, short + slow)


async def test_a_job_read_ahead_that_is_cancelled_never_runs(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_worker, "READ_AHEAD_HOLD", 30.0)  # held for as long as the test needs
    short = await backlog(queue, 60)
    [blocker] = await backlog(queue, 1, block=True)
    behind = await backlog(queue, 2)
    go_on = asyncio.Event()
    ran: list[str] = []

    async with queue.worker(recording(ran, go_on), concurrency=1) as worker:
        async with asyncio.timeout(30):
            while blocker not in ran or behind[0] not in [f["id"] for _, f, _ in worker._ahead]:
                await asyncio.sleep(0.005)
        assert await queue.cancel(behind[0])
        async with asyncio.timeout(10):
            while (await queue.get(behind[0])).status is not JobStatus.CANCELLED:
                await asyncio.sleep(0.01)
        go_on.set()
        for job_id in [*short, blocker, behind[1]]:
            await queue.wait(job_id, timeout=30)
    assert behind[0] not in ran and behind[1] in ran
    cancelled = await queue.get(behind[0])
    assert [a.outcome for a in cancelled.history] == ["cancelled"]
    await check_invariants(queue, [*short, blocker, *behind])


async def test_a_stop_hands_back_the_jobs_read_ahead(queue: Queue) -> None:
    ids = await backlog(queue, 600)
    stopped = asyncio.Event()
    ran: list[str] = []

    async def handler(job: ActiveJob) -> None:
        ran.append(job.id)
        if len(ran) == 100:  # one slot stays taken; the other runs on
            await stopped.wait()

    worker = await queue.worker(handler, concurrency=2).start()
    async with asyncio.timeout(30):
        while len(ran) < 100 or not worker._ahead:
            await asyncio.sleep(0)
    stopping = asyncio.create_task(worker.stop())
    await asyncio.sleep(0.05)
    stopped.set()
    await stopping
    assert await held(queue) == 0
    records = [await queue.get(job_id) for job_id in ids]
    done = [r for r in records if r.status is JobStatus.COMPLETED]
    back = [r for r in records if r.status is not JobStatus.COMPLETED]
    assert sorted(r.id for r in done) == sorted(ran)
    assert back and all((r.status, r.attempt) == (JobStatus.WAITING, 0) for r in back)
    await check_invariants(queue, ids, settled=False)


def test_read_ahead_is_not_negative(queue: Queue) -> None:
    async def handler(job: ActiveJob) -> None:
        return None

    with pytest.raises(ValueError, match="read_ahead"):
        queue.worker(handler, read_ahead=-1)
