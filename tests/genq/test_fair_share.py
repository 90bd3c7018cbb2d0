"""Fair share: waiting jobs served round-robin across tenants (weighted), a per-tenant cap on
leases enforced when reserving, and a backlog of one tenant delaying another by about a slot."""

from __future__ import annotations

import asyncio
import statistics

import pytest

from genq import EnqueueItem, Queue
from tests.faults.invariants import check_fair_share, check_invariants
from tests.faults.support import ScriptCalls
from tests.monitoring import commands_run_by_scripts


async def enqueue(queue: Queue, tenant: str, count: int, priority: int = 0) -> list[str]:
    items = [EnqueueItem({"t": tenant}, tenant=tenant, priority=priority) for _ in range(count)]
    return [e.id for e in await queue.enqueue_many(items)]


async def tenants_of(queue: Queue, ids: list[str]) -> str:
    return "".join([(await queue.get(job_id)).tenant for job_id in ids])  # type: ignore[union-attr]


async def test_fair_share_alternates_tenants_whatever_the_arrival_order(queue: Queue) -> None:
    await enqueue(queue, "a", 4)
    await enqueue(queue, "b", 2)
    await enqueue(queue, "c", 1)
    calls = ScriptCalls(queue)
    picked = await calls.pick(7)
    assert await tenants_of(queue, picked) == "abcabaa"
    assert await check_fair_share(queue) == []


async def test_fair_share_keeps_priority_then_fifo_within_a_tenant(queue: Queue) -> None:
    low = await enqueue(queue, "a", 2, priority=0)
    high = await enqueue(queue, "a", 1, priority=5)
    b = await enqueue(queue, "b", 1, priority=-5)
    picked = await ScriptCalls(queue).pick(4)
    assert picked == [high[0], b[0], low[0], low[1]]


async def test_fair_share_weights_give_a_heavier_tenant_more_turns(redis, prefix) -> None:
    queue = Queue(redis, prefix, tenant_weights={"gold": 3})
    await enqueue(queue, "gold", 9)
    await enqueue(queue, "free", 9)
    picked = await ScriptCalls(queue).pick(8)
    order = await tenants_of(queue, picked)
    assert order.count("g") == 6 and order.count("f") == 2, order


async def test_fair_share_cap_parks_a_tenant_until_one_of_its_leases_ends(redis, prefix) -> None:
    queue = Queue(redis, prefix, tenant_concurrency=2)
    a = await enqueue(queue, "a", 4)
    b = await enqueue(queue, "b", 1)
    calls = ScriptCalls(queue)
    first = await calls.pick(10)
    assert sorted(first) == sorted([a[0], a[1], b[0]])  # a's third waits: it holds two
    assert await calls.pick(10) == []
    assert await redis.zrange(queue.keys.parked, 0, -1) == [b"a"]
    await calls.activate(a[0], "tok")
    await calls.settle(a[0], "tok", "complete", '"ok"')
    assert await calls.pick(10) == [a[2]]  # one slot freed, one more of a's
    assert await check_fair_share(queue) == []


async def test_a_pick_writes_its_claims_once_per_key_however_many_tenants_it_serves(
    redis, redis_url, prefix
) -> None:
    """Eight tenants taking turns one job each: the pick reads the turns once, decides every
    turn in the script's memory (one command each: the tenant's line), and then writes the new
    passes and the claims once per key."""
    queue = Queue(redis, prefix)
    for tenant in "abcdefgh":
        await enqueue(queue, tenant, 2)
    await queue.admit()  # what the intake costs a pick is measured apart (test_intake)
    with commands_run_by_scripts(redis_url, prefix) as seen:
        picked = await ScriptCalls(queue).pick(8, holder="w1")
    assert await tenants_of(queue, picked) == "abcdefgh"
    assert seen.count("zrangebylex lines") == 8
    assert seen.count("zrange turns") == 1
    writes = (
        "zadd turns", "zrem lines", "zrem ready", "zrem waits", "zadd leases", "hset holders",
        "zadd holds",
    )  # fmt: skip
    for write in writes:
        assert seen.count(write) == 1, (write, seen)
    assert seen.count("hincrby running") == 8  # one per tenant served
    assert len(seen) < 8 + 8 + 20, seen
    assert await check_fair_share(queue) == []


def one_claim_at_a_time(
    lines: dict[str, list[str]], weights: dict[str, int], cap: int
) -> list[str]:
    """Stride scheduling as the fair share defines it, one claim per step: the tenant with the
    lowest pass (ties by name) takes the first job of its line and moves back by STRIDE / its
    weight; one holding ``cap`` leases is parked (nothing settles here)."""
    turns = {tenant: 0 for tenant in lines}
    held = dict.fromkeys(lines, 0)
    claims: list[str] = []
    while turns:
        tenant = min(turns, key=lambda t: (turns[t], t))
        if held[tenant] >= cap:
            del turns[tenant]
            continue
        claims.append(lines[tenant].pop(0))
        held[tenant] += 1
        turns[tenant] += 1_000_000 // weights.get(tenant, 1)
        if not lines[tenant]:
            del turns[tenant]
    return claims


@pytest.mark.parametrize("per_pick", [1, 3, 7, 50])
async def test_picks_of_any_size_claim_as_one_claim_at_a_time_would(
    redis, prefix, per_pick
) -> None:
    """Fourteen tenants (more than a small pick reads of the turns at once; "t10" sorts before
    "t2"), weights and a cap: picks of ``per_pick`` jobs claim the very jobs, in the very order,
    that one claim at a time gives."""
    weights, cap = {"t1": 3, "t4": 2, "t11": 5}, 4
    queue = Queue(redis, prefix, tenant_weights=weights, tenant_concurrency=cap)
    counts = {f"t{i}": 1 + (i * 7) % 6 for i in range(14)}
    arrivals = [t for t, count in counts.items() for _ in range(count)]
    arrivals = arrivals[1::2] + arrivals[::2]  # tenants arrive interleaved
    ids = await queue.enqueue_many([EnqueueItem({"t": t}, tenant=t) for t in arrivals])
    lines: dict[str, list[str]] = {t: [] for t in counts}
    for tenant, e in zip(arrivals, ids, strict=True):
        lines[tenant].append(e.id)
    calls = ScriptCalls(queue)
    claimed: list[str] = []
    while batch := await calls.pick(per_pick):
        assert len(batch) <= per_pick
        claimed += batch
    assert claimed == one_claim_at_a_time(lines, weights, cap)
    assert await check_fair_share(queue) == []


async def test_a_pick_reads_the_turns_again_when_those_it_read_are_used_up(redis, prefix) -> None:
    """A pick of 3 reads the lowest 4 tenants of the turns: p1 and p2 hold their cap and are
    parked, w and x are served and move back past the last tenant read. The third claim is then
    y's, which the pick had not read: it reads the turns again instead of serving w twice or
    stopping short."""
    queue = Queue(redis, prefix, tenant_concurrency=2)
    jobs = {tenant: await enqueue(queue, tenant, 4) for tenant in ("p1", "p2", "w", "x", "y")}
    calls = ScriptCalls(queue)
    first = await calls.pick(10)  # two rounds: every tenant holds its cap, all at one pass
    assert await tenants_of(queue, first) == "p1p2wxy" * 2
    for job_id in first[2:5] + first[7:10]:  # w, x and y finish theirs
        await calls.activate(job_id, "tok")
        await calls.settle(job_id, "tok", "complete", '"ok"')
    assert await calls.pick(3) == [jobs["w"][2], jobs["x"][2], jobs["y"][2]]
    assert sorted(await queue.redis.zrange(queue.keys.parked, 0, -1)) == [b"p1", b"p2"]
    assert await check_fair_share(queue) == []


async def test_fair_share_cap_counts_across_workers(redis, prefix) -> None:
    """Two workers of one queue: a tenant never runs more than the cap at once."""
    queue = Queue(redis, prefix, tenant_concurrency=3)
    running: list[int] = [0]
    most: list[int] = [0]

    async def handler(job):
        running[0] += 1
        most[0] = max(most[0], running[0])
        await asyncio.sleep(0.02)
        running[0] -= 1

    ids = await enqueue(queue, "a", 30)
    async with queue.worker(handler, concurrency=8), queue.worker(handler, concurrency=8):
        for job_id in ids:
            await queue.wait(job_id, timeout=30)
    assert most[0] == 3
    await check_invariants(queue, ids)


async def test_fair_share_cancel_and_retry_keep_the_books(queue: Queue) -> None:
    a = await enqueue(queue, "a", 2)
    await enqueue(queue, "b", 1)
    await queue.admit()
    assert await queue.cancel(a[0]) and await queue.cancel(a[1])
    assert await redis_turns(queue) == [b"b"]  # a left the turns with its last waiting job
    assert await check_fair_share(queue) == []


async def redis_turns(queue: Queue) -> list[bytes]:
    return list(await queue.redis.zrange(queue.keys.turns, 0, -1))


async def test_fair_share_adopts_jobs_an_older_genq_made_ready(queue: Queue) -> None:
    """A job in the ready set that no tenant set holds (written before fair share) still runs."""
    e = await queue.enqueue("old")
    k = queue.keys
    await queue.redis.delete(k.lines, k.turns)
    await queue.redis.hdel(k.job(e.id), "tenant")

    async def handler(job):
        return job.payload

    async with queue.worker(handler):
        assert await queue.wait(e.id, timeout=5) == "old"
    assert await check_fair_share(queue) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tenant_weights": {"a": 0}}, "weight of tenant 'a'"),
        ({"tenant_weights": {"a": 1001}}, "weight of tenant 'a'"),
        ({"tenant_weights": {"{a}": 2}}, "invalid tenant"),
        ({"tenant_concurrency": -1}, "tenant_concurrency"),
    ],
)
def test_fair_share_bad_options_are_refused(redis, prefix, options, message) -> None:
    with pytest.raises(ValueError, match=message):
        Queue(redis, prefix, **options)


async def test_fair_share_bad_tenant_is_refused(queue: Queue) -> None:
    with pytest.raises(ValueError, match="invalid tenant"):
        await queue.enqueue("p", tenant="x" * 201)
    assert (await queue.stats()).waiting == 0


async def test_fair_share_backlog_of_one_tenant_delays_another_by_about_a_slot(
    redis, prefix
) -> None:
    """The issue's scenario: A enqueues 5,000 jobs of 20 ms, then B enqueues 10 (one every 20 ms);
    with one worker of concurrency 8, no more than a slot's worth of A's jobs (8) is claimed
    between a B job's enqueue and its start, and all of A's jobs still complete. Measured by
    the claims, on the server's clock (the records' created_at and started_at), not by time
    alone: on a machine busy with other suites a stalled process once held one B job 241 ms
    while no claim at all was made. Time is checked too: the median B job starts within
    150 ms, and the slowest within 1 s (behind A's backlog in one line it would wait ~12 s)."""
    queue = Queue(redis, prefix, result_ttl=120.0)

    async def handler(job):
        await asyncio.sleep(0.02)

    a_items = [EnqueueItem({"n": i}, tenant="A") for i in range(5000)]
    a_ids: list[str] = []
    for start in range(0, len(a_items), 500):
        a_ids += [e.id for e in await queue.enqueue_many(a_items[start : start + 500])]
    async with queue.worker(handler, concurrency=8):
        await asyncio.sleep(0.3)  # the worker is busy with A's backlog
        b_ids = []
        for _ in range(10):
            b_ids.append((await queue.enqueue({"b": 1}, tenant="B")).id)
            await asyncio.sleep(0.02)
        for job_id in b_ids:
            await queue.wait(job_id, timeout=10)
        assert (await queue.stats()).waiting > 1000  # A's backlog was still there
        for job_id in a_ids:
            await queue.wait(job_id, timeout=120)
    # The invariants' audit holds every record (the server's ms): no second read of them.
    records = (await check_invariants(queue, a_ids + b_ids)).records
    a_starts = [int(records[job_id]["started_at"]) for job_id in a_ids]
    ahead, waits = [], []
    for job_id in b_ids:
        created, started = int(records[job_id]["created_at"]), int(records[job_id]["started_at"])
        # Strictly between: A jobs of the pick that claimed B carry B's started_at.
        ahead.append(sum(created < at < started for at in a_starts))
        waits.append((started - created) / 1000)
    detail = f"A jobs claimed ahead of each B job: {ahead}; B waited {waits}"
    assert max(ahead) <= 8, detail
    assert statistics.median(waits) < 0.150, detail
    assert max(waits) < 1.0, detail
