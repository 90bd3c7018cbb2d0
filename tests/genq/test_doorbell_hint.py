"""The doorbell names a lone job: ``Queue.enqueue`` rings with the new job's id, and the idle
worker it wakes hands that id to its pick, which activates the job in the same call when it
claims it, so a lone job starts one round trip after the ring, not two."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from genq import ActiveJob, EnqueueItem, JobStatus, Queue, _worker
from genq._reserve import pick_hinted
from tests.faults.invariants import check_invariants
from tests.faults.support import ScriptCalls


async def test_an_enqueue_rings_the_doorbell_with_its_job_id(queue: Queue) -> None:
    job = await queue.enqueue("lone")
    batch = await queue.enqueue_many([EnqueueItem("a"), EnqueueItem("b")])
    assert batch
    rings = [r.decode() for r in await queue.redis.lrange(queue.keys.signal, 0, -1)]
    assert rings == ["1", "1", job.id]  # newest first: a batch rings without ids


async def test_an_enqueue_with_its_own_id_or_key_rings_with_that_id(queue: Queue) -> None:
    # The gateway names its jobs (and a keyed enqueue takes the items' shape of the script):
    # their lone jobs are named too, so the woken worker starts them one round trip sooner.
    named = await queue.enqueue("named", job_id="gen_named")
    keyed = await queue.enqueue("keyed", idempotency_key="k-1")
    later = await queue.enqueue("later", job_id="gen_later", delay=60)
    assert later.id == "gen_later"
    rings = [r.decode() for r in await queue.redis.lrange(queue.keys.signal, 0, -1)]
    assert rings == [keyed.id, named.id]  # a delayed job rings nothing


async def test_a_hinted_pick_activates_the_named_job_and_leaves_the_others_claimed(
    queue: Queue,
) -> None:
    first = await queue.enqueue("first")
    second = await queue.enqueue("second")
    started, claimed, expired, _ = await pick_hinted(queue, 2, "w", second.id, lease=30.0)
    assert (claimed, expired) == ([first.id], [])
    [(token, record)] = started
    assert (record["id"], record["status"], record["attempt"]) == (second.id, "active", "1")
    assert record["token"] == token
    job = await queue.get(second.id)
    assert (job.status, job.attempt) == (JobStatus.ACTIVE, 1)
    # the claimed one is activated as before; the books agree after both
    assert await ScriptCalls(queue).activate(first.id, "t1") == 0
    await check_invariants(queue, [first.id, second.id], settled=False)


async def test_a_hint_for_a_job_this_pick_does_not_claim_activates_nothing(queue: Queue) -> None:
    a = await queue.enqueue("a", tenant="a")
    b = await queue.enqueue("b", tenant="b")
    started, claimed, _, _ = await pick_hinted(queue, 1, "w", b.id, lease=30.0)
    assert (started, claimed) == ([], [a.id])  # tenant a's turn came first
    assert (await queue.get(b.id)).status == JobStatus.WAITING
    started, claimed, _, _ = await pick_hinted(queue, 1, "w", "no-such-job", lease=30.0)
    assert (started, claimed) == ([], [b.id])
    await check_invariants(queue, [a.id, b.id], settled=False)


async def test_an_idle_worker_starts_a_lone_job_without_a_separate_activation(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    activated: list[str] = []
    real_activate = _worker.activate

    async def counting_activate(q: Any, ids: list[str], lease: float) -> Any:
        activated.extend(ids)
        return await real_activate(q, ids, lease)

    monkeypatch.setattr(_worker, "activate", counting_activate)
    seen: list[tuple[str, int]] = []

    async def handler(job: ActiveJob) -> str:
        seen.append((job.id, job.attempt))
        return "done"

    async with queue.worker(handler, concurrency=2) as worker:
        async with asyncio.timeout(10):
            while not worker._blocking:  # idle: blocked on the doorbell
                await asyncio.sleep(0.005)
        lone = await queue.enqueue("lone")
        assert await queue.wait(lone.id, timeout=10) == "done"
        # a burst that arrives while it runs still goes through the ordinary activation
        more = [e.id for e in await queue.enqueue_many([EnqueueItem(n) for n in "xyz"])]
        for job_id in more:
            assert await queue.wait(job_id, timeout=10) == "done"
    assert lone.id not in activated
    assert sorted(seen) == sorted([(lone.id, 1)] + [(i, 1) for i in more])
    await check_invariants(queue, [lone.id, *more])


async def test_a_pick_that_took_less_than_asked_is_not_repeated_at_once(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lone job at an idle worker is handed off (tests/genq/test_hand_off.py), and the worker
    # waits again instead of picking (a pick that would find nothing, and hold the server
    # while the job starts).
    picks: list[str] = []
    real_hinted = _worker.pick_hinted

    async def counting_hinted(*args: Any, **kwargs: Any) -> Any:
        picks.append("hinted")
        return await real_hinted(*args, **kwargs)

    monkeypatch.setattr(_worker, "pick_hinted", counting_hinted)
    release = asyncio.Event()

    async def handler(job: ActiveJob) -> str:
        await release.wait()
        return "done"

    async with queue.worker(handler, concurrency=4, poll=30) as worker:
        try:
            async with asyncio.timeout(10):
                while not worker._blocking:
                    await asyncio.sleep(0.005)
            picks.clear()
            lone = await queue.enqueue("lone")
            async with asyncio.timeout(10):
                while worker.running != [lone.id] or not worker._blocking:
                    await asyncio.sleep(0.005)
            await asyncio.sleep(0.05)  # time enough for a pick at once, were one coming
            assert picks == []
        finally:
            release.set()  # the worker's stop waits for its handlers
        # a pick that fills every free slot is repeated at once: the line may hold more
        burst = [e.id for e in await queue.enqueue_many([EnqueueItem(n) for n in "abcde"])]
        for job_id in [lone.id, *burst]:
            assert await queue.wait(job_id, timeout=10) == "done"
    await check_invariants(queue, [lone.id, *burst])
