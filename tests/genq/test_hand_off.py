"""The hand-off: a built-in worker about to wait on the doorbell with a free slot lists an offer,
and the enqueue of a job that no other job is ahead of starts the job under the oldest offer and
puts it on the hand-off list the idle workers wait on: the job starts with no pick in between.
The worker's next pick withdraws an offer still listed, or collects the job handed off under one
taken meanwhile; presence.lua clears a vanished worker's."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from genq import ActiveJob, EnqueueItem, JobStatus, Queue, _worker, enqueue_admitted
from genq._calls import presence_call
from genq._reserve import HandOff, make_offer, pick_hinted, reclaim
from tests.faults.invariants import check_invariants


async def listed(queue: Queue, key: str) -> list[str]:
    return [e.decode() for e in await queue.redis.lrange(key, 0, -1)]


async def test_a_lone_job_at_an_idle_worker_runs_with_no_pick(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    picks: list[list[str]] = []  # what the worker ran as each pick began
    real = _worker.pick_hinted

    async def watched(*args: Any, **kwargs: Any) -> Any:
        picks.append(list(worker.running))
        return await real(*args, **kwargs)

    monkeypatch.setattr(_worker, "pick_hinted", watched)

    async def handler(job: ActiveJob) -> str:
        await job.emit("the first chunk")
        return "done"

    async with queue.worker(handler, concurrency=2, poll=30) as worker:
        async with asyncio.timeout(10):
            while not worker._blocking:
                await asyncio.sleep(0.005)
        [offer] = await listed(queue, queue.keys.idle)
        assert offer.startswith(worker.holder + "\0")
        picks.clear()
        job = await queue.enqueue("lone")
        assert await queue.wait(job.id, timeout=10) == "done"
        assert picks == []  # and the worker waits again, offering its slot
        async with asyncio.timeout(10):
            while len(await listed(queue, queue.keys.idle)) != 1:
                await asyncio.sleep(0.005)
        record = await queue.get(job.id)
        assert record.attempt == 1
        assert await queue.redis.lrange(queue.keys.intake, 0, -1) == []
        assert await queue.redis.lrange(queue.keys.signal, 0, -1) == []  # no ring
        stopping = time.monotonic()
    # a stop ends the wait with a push to the worker's own wake list (a 30 s poll otherwise),
    # and withdraws the offer
    assert time.monotonic() - stopping < 5
    assert await queue.redis.lrange(queue.keys.idle, 0, -1) == []
    assert await queue.redis.llen(queue.keys.wake(worker.holder)) == 0
    await check_invariants(queue, [job.id])


async def test_the_enqueue_starts_the_job_under_the_offer(queue: Queue) -> None:
    offer = make_offer(queue, "w1", 30.0)
    await queue.redis.rpush(queue.keys.idle, offer)
    job = await queue.enqueue({"p": 1}, tenant="t", idempotency_key="k")
    assert await queue.redis.lrange(queue.keys.idle, 0, -1) == []
    [raw] = await queue.redis.lrange(queue.keys.handoffs, 0, -1)
    handed = HandOff.parse(raw)
    assert handed.holder == "w1" and handed.offered_by(offer)
    stored = {
        k.decode(): v.decode()
        for k, v in (await queue.redis.hgetall(queue.keys.job(job.id))).items()
    }
    assert handed.fields == stored  # the list carries the record as written
    assert (stored["status"], stored["attempt"], stored["token"]) == ("active", "1", handed.token)
    assert stored["started_at"] == stored["created_at"]
    assert await queue.redis.hget(queue.keys.holders, job.id) == b"w1"
    assert await queue.redis.hget(queue.keys.running, "t") == b"1"
    lease = await queue.redis.zscore(queue.keys.leases, job.id)
    assert lease == int(stored["lease_until"]) == int(stored["created_at"]) + 30_000
    await check_invariants(queue, [job.id], settled=False)


async def test_a_named_job_and_an_admitted_one_are_handed_off_too(queue: Queue) -> None:
    await queue.redis.rpush(queue.keys.idle, make_offer(queue, "w1", 30.0))
    await queue.redis.rpush(queue.keys.idle, make_offer(queue, "w2", 30.0))
    named = await queue.enqueue("named", job_id="gen_named")
    later = await queue.enqueue("later", job_id="gen_later", delay=60)  # never handed off
    assert (await queue.get(named.id)).status == JobStatus.ACTIVE
    assert (await queue.get(later.id)).status == JobStatus.SCHEDULED
    [raw] = await queue.redis.lrange(queue.keys.handoffs, 0, -1)
    assert HandOff.parse(raw).holder == "w1"
    assert len(await queue.redis.lrange(queue.keys.idle, 0, -1)) == 1  # w2's is still there

    # a layer's admission in the same write (the gateway's), then the enqueue hands it off
    admitted_in = queue.extra_key("admitted")
    admit = queue.redis.register_script("redis.call('ZADD', KEYS[1], 0, ARGV[1]) return 1")
    admitted = await enqueue_admitted(
        queue, EnqueueItem("admitted", job_id="gen_admitted"),
        (admit, [admitted_in], ["gen_admitted"]), admitted_in,
    )  # fmt: skip
    assert admitted.enqueued is not None and admitted.enqueued.id == "gen_admitted"
    assert (await queue.get("gen_admitted")).status == JobStatus.ACTIVE
    holders = [
        HandOff.parse(r).holder for r in await queue.redis.lrange(queue.keys.handoffs, 0, -1)
    ]
    assert holders == ["w1", "w2"]
    await check_invariants(queue, [named.id, later.id, "gen_admitted"], settled=False)


async def _cooling(queue: Queue) -> None:
    await queue.cooldown(60)


async def _ahead_in_intake(queue: Queue) -> None:
    await queue.enqueue("ahead")


async def _ahead_in_line(queue: Queue) -> None:
    await queue.enqueue("ahead")
    await queue.admit()


async def _scheduled_due(queue: Queue) -> None:
    await queue.enqueue("due", delay=0.001)
    await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    "ahead", [_ahead_in_intake, _ahead_in_line, _scheduled_due, _cooling],
    ids=["intake", "ready", "scheduled-due", "cooldown"],
)  # fmt: skip
async def test_nothing_is_handed_off_while_something_is_ahead(queue: Queue, ahead: Any) -> None:
    await ahead(queue)
    await queue.redis.delete(queue.keys.signal)  # as waiting workers take the rings
    offer = make_offer(queue, "w1", 30.0)
    await queue.redis.rpush(queue.keys.idle, offer, make_offer(queue, "w2", 30.0))
    queue.offers_seen = True  # the call sends the hand-off keys
    job = await queue.enqueue("behind")
    assert queue.offers_seen  # its reply: offers are listed
    assert (await queue.get(job.id)).status == JobStatus.WAITING
    assert (await listed(queue, queue.keys.idle))[0] == offer  # back at the head
    assert await queue.redis.lrange(queue.keys.handoffs, 0, -1) == []


async def test_a_tenant_at_the_offers_cap_waits_and_another_is_handed_off(
    redis: Any, prefix: str
) -> None:
    queue = Queue(redis, prefix, lease=5.0, tenant_concurrency=1)
    await queue.redis.rpush(queue.keys.idle, *(make_offer(queue, f"w{i}", 30.0) for i in (1, 2, 3)))
    first = await queue.enqueue("a1", tenant="a")
    second = await queue.enqueue("a2", tenant="a")  # a holds its one lease
    assert len(await queue.redis.lrange(queue.keys.idle, 0, -1)) == 2
    await queue.cancel(second.id)  # nothing ahead any more
    other = await queue.enqueue("b1", tenant="b")
    statuses = [(await queue.get(j.id)).status for j in (first, second, other)]
    assert statuses == [JobStatus.ACTIVE, JobStatus.CANCELLED, JobStatus.ACTIVE]
    await check_invariants(queue, [first.id, second.id, other.id], settled=False)


async def test_a_pick_withdraws_its_offer_or_collects_the_job_handed_off_under_it(
    queue: Queue,
) -> None:
    offer = make_offer(queue, "w1", 30.0)
    await queue.redis.rpush(queue.keys.idle, offer)
    started, claimed, _, _ = await pick_hinted(queue, 1, "w1", None, 30.0, offer)
    assert (started, claimed) == ([], [])
    assert await queue.redis.lrange(queue.keys.idle, 0, -1) == []  # withdrawn

    # taken while the worker looked away (woken by a ring, say): its next pick collects the job
    await queue.redis.rpush(queue.keys.idle, offer)
    job = await queue.enqueue("handed")
    behind = await queue.enqueue("behind")
    token = (await queue.redis.hget(queue.keys.job(job.id), "token")).decode()
    started, claimed, _, _ = await pick_hinted(queue, 2, "w1", None, 30.0, offer)
    assert [(t, fields["id"]) for t, fields in started] == [(token, job.id)]
    assert claimed == [behind.id]  # one claim fewer than asked: the collected job took a slot
    assert await queue.redis.lrange(queue.keys.handoffs, 0, -1) == []
    await check_invariants(queue, [job.id, behind.id], settled=False)


async def test_a_job_taken_under_another_workers_offer_is_filed_under_its_taker(
    queue: Queue,
) -> None:
    await queue.redis.rpush(queue.keys.idle, make_offer(queue, "w1", 30.0))
    job = await queue.enqueue("handed")
    await queue.redis.lpop(queue.keys.handoffs)  # w2 took it off the list
    await pick_hinted(queue, 1, "w2", None, 30.0, adopted=f"w1\0{job.id}")
    assert await queue.redis.hget(queue.keys.holders, job.id) == b"w2"
    holds = await queue.redis.zrange(queue.keys.holds, 0, -1)
    assert holds == [f"w2\0{job.id}".encode()]
    await check_invariants(queue, [job.id], settled=False)


async def test_a_vanished_workers_offer_and_hand_offs_leave_with_its_presence(
    queue: Queue,
) -> None:
    k = queue.keys
    await queue.redis.zadd(k.presence, {"gone": 0})  # its presence lapsed long ago
    await queue.redis.rpush(k.idle, make_offer(queue, "gone", 30.0))
    job = await queue.enqueue("handed")  # handed to the vanished worker
    await queue.redis.rpush(k.idle, make_offer(queue, "gone", 30.0), make_offer(queue, "w", 30.0))
    taken = await queue.scripts.presence(*presence_call(queue, "w", 5.0))
    assert [t.decode() for t in taken] == [job.id]
    assert [o.split("\0")[0] for o in await listed(queue, k.idle)] == ["w"]
    assert await queue.redis.lrange(k.handoffs, 0, -1) == []
    assert [j for j, _ in await reclaim(queue, [job.id])] == [job.id]
    assert (await queue.get(job.id)).status == JobStatus.WAITING
    await check_invariants(queue, [job.id], settled=False)


async def test_a_burst_at_idle_workers_runs_each_job_once(queue: Queue) -> None:
    ran: list[str] = []

    async def handler(job: ActiveJob) -> str:
        ran.append(job.id)
        await asyncio.sleep(0.01)
        return "done"

    async with (
        queue.worker(handler, concurrency=2, poll=30),
        queue.worker(handler, concurrency=2, poll=30),
    ):
        ids = []
        for i in range(30):
            ids.append((await queue.enqueue(i)).id)
            if i % 3 == 0:
                ids += [e.id for e in await queue.enqueue_many([EnqueueItem(i), EnqueueItem(-i)])]
        for job_id in ids:
            assert await queue.wait(job_id, timeout=15) == "done"
    assert sorted(ran) == sorted(ids)
    assert await queue.redis.lrange(queue.keys.idle, 0, -1) == []
    assert await queue.redis.lrange(queue.keys.handoffs, 0, -1) == []
    await check_invariants(queue, ids)


async def test_an_enqueue_sends_the_hand_off_keys_while_the_last_one_saw_an_offer(
    queue: Queue,
) -> None:
    # The hand-off's keys and path cost a call that hands nothing off a quarter of an enqueue:
    # a producer sends a job ready at once as an item with them while its last enqueue of one
    # job saw an idle worker's offer listed (a new queue object assumes one), else only the
    # offers list, whose length the reply gives (when the doorbell holds no other ring).
    sent: list[int] = []
    real = queue.scripts.enqueue

    async def counting(keys: Any, args: Any) -> Any:
        sent.append(len(keys))
        return await real(keys, args)

    queue.scripts.enqueue = counting  # type: ignore[method-assign]
    first = await queue.enqueue("no worker waits")
    second = await queue.enqueue("still none")
    await queue.redis.rpush(queue.keys.idle, make_offer(queue, "w1", 30.0))
    await queue.redis.delete(queue.keys.signal)  # as the waiting worker took the rings
    third = await queue.enqueue("behind the others: not handed off, but an offer is listed")
    await queue.admit()
    for job in (first, second, third):
        await queue.cancel(job.id)
    handed = await queue.enqueue("handed off", job_id="named")
    # the first as an item with the hand-off's keys, then in the shape for one new job
    assert sent == [12 + 19, 4 + 1, 4 + 1, 12 + 19]
    assert [(await queue.get(j.id)).status for j in (third, handed)] == [
        JobStatus.CANCELLED, JobStatus.ACTIVE,
    ]  # fmt: skip


async def test_a_job_handed_to_a_worker_resized_to_nothing_goes_back_to_the_line(
    queue: Queue,
) -> None:
    ran: list[str] = []

    async def handler(job: ActiveJob) -> str:
        ran.append(job.id)
        return "done"

    async with queue.worker(handler, concurrency=1, poll=30) as worker:
        async with asyncio.timeout(10):
            while not worker._blocking:
                await asyncio.sleep(0.005)
        worker.resize(0)  # while it waits, its offer listed
        job = await queue.enqueue("handed, then handed back")
        async with asyncio.timeout(10):
            while (await queue.get(job.id)).status != JobStatus.WAITING:
                await asyncio.sleep(0.005)
        record = await queue.get(job.id)
        assert (ran, record.attempt) == ([], 0)  # its attempt not counted
        await check_invariants(queue, [job.id], settled=False)
        worker.resize(1)
        assert await queue.wait(job.id, timeout=10) == "done"
    assert ran == [job.id]
    await check_invariants(queue, [job.id])


@pytest.mark.parametrize("arrival", ["handed off", "picked when due"])
async def test_a_started_jobs_first_steps_run_before_the_next_offer(
    queue: Queue, monkeypatch: pytest.MonkeyPatch, arrival: str
) -> None:
    """A handler's first step, and the task it starts there (as aiohttp writes a request from
    a task of its own), run before the worker writes its next offer: a generation's provider
    request is on its way first, the offer's Python after it."""
    order: list[str] = []
    real_wait = _worker.Worker._wait

    async def watched_wait(self: _worker.Worker, offer: str, timeout: float) -> Any:
        order.append("offer")
        return await real_wait(self, offer, timeout)

    monkeypatch.setattr(_worker.Worker, "_wait", watched_wait)
    writers: set[asyncio.Task[None]] = set()

    async def write(answered: asyncio.Future[None]) -> None:
        order.append("request written")
        answered.set_result(None)

    async def handler(job: ActiveJob) -> str:
        order.append("first step")
        answered = asyncio.get_running_loop().create_future()
        writer = asyncio.create_task(write(answered))
        writers.add(writer)
        await answered
        return "done"

    async with queue.worker(handler, concurrency=2, poll=30) as worker:
        async with asyncio.timeout(10):
            while not worker._blocking:
                await asyncio.sleep(0.005)
        order.clear()
        if arrival == "handed off":
            job = await queue.enqueue("lone")
        else:  # not handed off (it is not runnable yet): the pick that finds it due starts it
            job = await queue.enqueue("later", delay=0.2)
        assert await queue.wait(job.id, timeout=10) == "done"
        assert order[:3] == ["first step", "request written", "offer"]
    await check_invariants(queue, [job.id])
