"""The job index: listings by status and tenant, paging while jobs change, retry of any finished
job, delete, lookup by idempotency key, and retention 0 (kept forever)."""

from __future__ import annotations

import asyncio

import pytest

from genq import EnqueueItem, JobNotFinishedError, JobStatus, Queue
from tests.faults.invariants import check_index, check_invariants
from tests.faults.support import ScriptCalls


async def ids_of(page) -> list[str]:
    return [job.id for job in page.jobs]


async def test_index_lists_newest_first_by_status_and_tenant(queue: Queue) -> None:
    a = [(await queue.enqueue(i, tenant="a")).id for i in range(3)]
    await asyncio.sleep(0.002)  # the listing orders by creation, to the millisecond
    b = (await queue.enqueue("b", tenant="b", delay=60)).id
    await asyncio.sleep(0.002)
    c = (await queue.enqueue("c", tenant="a")).id
    assert await queue.cancel(c)
    everything = await queue.jobs()
    assert [j.id for j in everything.jobs][:2] == [c, b]
    assert {j.id for j in everything.jobs} == {*a, b, c} and everything.next_cursor is None
    assert {j.id for j in (await queue.jobs(status="waiting")).jobs} == set(a)
    assert [j.id for j in (await queue.jobs(status="scheduled")).jobs] == [b]
    assert [j.id for j in (await queue.jobs(status="cancelled", tenant="a")).jobs] == [c]
    assert (await queue.jobs(tenant="b")).jobs[0].tenant == "b"
    assert (await queue.jobs(status="cancelled", tenant="b")).jobs == []


async def test_index_follows_a_job_through_its_states(queue: Queue) -> None:
    e = await queue.enqueue("p", tenant="t")
    calls = ScriptCalls(queue)
    await calls.pick(1)
    await calls.activate(e.id, "tok")
    assert [j.id for j in (await queue.jobs(status="active", tenant="t")).jobs] == [e.id]
    await calls.settle(e.id, "tok", "fail", '"boom"')
    assert [j.id for j in (await queue.jobs(status="dead")).jobs] == [e.id]
    assert await check_index(queue) == []


async def test_index_pages_without_repeats_or_skips_while_jobs_change(queue: Queue) -> None:
    """Paging waiting jobs while others are added and cancelled: each job that stayed waiting
    all along is seen exactly once."""
    stay = [e.id for e in await queue.enqueue_many([EnqueueItem(i) for i in range(45)])]
    churn = [e.id for e in await queue.enqueue_many([EnqueueItem(i) for i in range(10)])]
    seen: list[str] = []
    cursor = None
    for page_no in range(100):
        page = await queue.jobs(status="waiting", limit=7, cursor=cursor)
        seen += await ids_of(page)
        if page_no < len(churn):
            await queue.cancel(churn[page_no])  # one leaves
            await queue.enqueue("new")  # one arrives (newer than every cursor: not seen)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == len(set(seen)), "a job was listed twice"
    assert set(stay) <= set(seen), "a job that stayed waiting all along was skipped"


async def test_index_lookup_by_idempotency_key(queue: Queue) -> None:
    e = await queue.enqueue("p", idempotency_key="order-7")
    found = await queue.find("order-7")
    assert found is not None and found.id == e.id
    assert await queue.find("nobody") is None


async def test_index_retry_a_cancelled_job_keeps_its_id_and_clears_its_output(
    queue: Queue,
) -> None:
    e = await queue.enqueue("p", idempotency_key="k")
    assert await queue.cancel(e.id)
    assert await queue.retry_dead(e.id) is False  # not a dead letter
    assert await queue.retry(e.id) is True
    job = await queue.get(e.id)
    assert job is not None and (job.status, job.attempt) == (JobStatus.WAITING, 0)
    assert [ev.type async for ev in _events(queue, e.id)] == ["restarted"]
    assert (await queue.find("k")).id == e.id  # type: ignore[union-attr]

    async def handler(job):
        return "again"

    async with queue.worker(handler):
        assert await queue.wait(e.id, timeout=5) == "again"
    assert await queue.retry(e.id) is False  # completed: not retried
    await check_invariants(queue, [e.id])


async def _events(queue: Queue, job_id: str):
    for _, fields in await queue.redis.xrange(queue.keys.events(job_id)):
        yield type("E", (), {"type": fields[b"type"].decode()})


async def test_index_delete_a_finished_job_removes_every_trace(queue: Queue) -> None:
    e = await queue.enqueue("p", idempotency_key="gone")
    with pytest.raises(JobNotFinishedError):
        await queue.delete(e.id)
    assert await queue.cancel(e.id)
    assert await queue.delete(e.id) is True
    assert await queue.get(e.id) is None
    assert await queue.find("gone") is None
    assert (await queue.jobs()).jobs == []
    assert await queue.delete(e.id) is False
    k = queue.keys
    assert not await queue.redis.exists(k.events(e.id), k.index, k.tenant_index, k.index_expiry)


async def test_index_finished_entries_leave_with_their_records(redis, prefix) -> None:
    queue = Queue(redis, prefix, result_ttl=0.2)
    e = await queue.enqueue("p")
    assert await queue.cancel(e.id)
    assert len((await queue.jobs(status="cancelled")).jobs) == 1
    await asyncio.sleep(0.3)
    await ScriptCalls(queue).pick(1)  # any worker's next pick drops the expired entries
    k = queue.keys
    assert not await redis.exists(k.index, k.tenant_index, k.index_expiry)


async def test_index_retention_zero_keeps_finished_jobs_forever(redis, prefix) -> None:
    queue = Queue(redis, prefix, result_ttl=0, dead_ttl=0, max_attempts=1)

    async def handler(job):
        if job.payload == "bad":
            raise RuntimeError("no")
        return "ok"

    good = await queue.enqueue("good", idempotency_key="g")
    bad = await queue.enqueue("bad")
    async with queue.worker(handler):
        assert await queue.wait(good.id, timeout=5) == "ok"
        with pytest.raises(Exception, match="no"):
            await queue.wait(bad.id, timeout=5)
    k = queue.keys
    for key in (k.job(good.id), k.events(good.id), k.idempotency("g"), k.job(bad.id)):
        assert await redis.pttl(key) == -1, key  # no expiry
    assert await redis.zcard(k.index_expiry) == 0
    assert [e.id for e in await queue.dead_entries()] == [bad.id]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"status": "sleeping"}, "status must be one of"),
        ({"limit": 0}, "limit must be"),
        ({"cursor": "nope"}, "invalid cursor"),
        ({"tenant": "{x}"}, "invalid tenant"),
    ],
)
async def test_index_bad_listing_options_are_refused(queue: Queue, kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        await queue.jobs(**kwargs)


async def test_index_counts_jobs_per_status(queue: Queue) -> None:
    await queue.enqueue("a", tenant="a")
    e = await queue.enqueue("b", tenant="b")
    await queue.cancel(e.id)
    counts = await queue.job_counts()
    assert (counts["waiting"], counts["cancelled"], counts["active"]) == (1, 1, 0)
    assert (await queue.job_counts(tenant="b"))["waiting"] == 0


async def test_index_ids_page_like_the_listing_without_reading_records(queue: Queue) -> None:
    for i in range(5):
        await queue.enqueue(i, tenant="t")
        await asyncio.sleep(0.002)
    listed = await queue.jobs(tenant="t", limit=3)
    ids = await queue.job_ids(tenant="t", limit=3)
    assert (ids.ids, ids.next_cursor) == ([j.id for j in listed.jobs], listed.next_cursor)
    rest = await queue.job_ids(tenant="t", limit=3, cursor=ids.next_cursor)
    assert len(rest.ids) == 2 and rest.next_cursor is None


async def test_index_lists_active_jobs_from_the_lease_set_and_waiting_past_them(
    queue: Queue,
) -> None:
    """An activation moves no index entry (the job stays listed as waiting); the listings and
    counts still show each job once under its record's status, paging past the active ones."""
    items = [EnqueueItem(i, tenant="t" if i % 2 else "u") for i in range(12)]
    ids = [e.id for e in await queue.enqueue_many(items)]
    calls = ScriptCalls(queue)
    claimed = await calls.pick(6)
    for job_id in claimed[:4]:  # the other two stay claimed: waiting, holding a lease
        assert await calls.activate(job_id, f"tok-{job_id}") == 0
    active = set(claimed[:4])
    k = queue.keys
    assert await queue.redis.zlexcount(k.index, b"[active\0", b"(active\1") == 0
    assert await queue.redis.zlexcount(k.index, b"[waiting\0", b"(waiting\1") == 12

    async def every(status: str | None, tenant: str | None = None) -> list[str]:
        seen, cursor = [], None
        while True:
            page = await queue.jobs(status=status, tenant=tenant, limit=3, cursor=cursor)
            seen += [(j.id, j.status.value) for j in page.jobs]
            ids_page = await queue.job_ids(status=status, tenant=tenant, limit=3, cursor=cursor)
            assert ids_page.ids == [j.id for j in page.jobs]
            cursor = page.next_cursor
            if cursor is None:
                return seen

    assert sorted(await every("active")) == sorted((i, "active") for i in active)
    assert sorted(await every("waiting")) == sorted((i, "waiting") for i in ids if i not in active)
    everything = await every(None)
    assert len(everything) == 12 and {i for i, _ in everything} == set(ids)
    assert {i for i, s in everything if s == "active"} == active
    # newest first, as the index orders them (creation ms, then id)
    created = {j.id: j.created_at for j in (await queue.jobs(limit=12)).jobs}
    order = [i for i, _ in everything]
    assert order == sorted(order, key=lambda i: (created[i], i.encode()), reverse=True)
    t_active = {i for i in active if items[ids.index(i)].tenant == "t"}
    assert {i for i, _ in await every("active", "t")} == t_active
    counts = await queue.job_counts()
    assert (counts["active"], counts["waiting"]) == (4, 8)
    t_counts = await queue.job_counts(tenant="t")
    assert (t_counts["active"], t_counts["waiting"]) == (len(t_active), 6 - len(t_active))
    for job_id in active:
        await calls.settle(job_id, f"tok-{job_id}", "complete", '"ok"')
    counts = await queue.job_counts()
    assert (counts["active"], counts["waiting"], counts["completed"]) == (0, 8, 4)
    assert await check_index(queue) == []


async def test_index_counts_a_job_an_older_genq_listed_as_active(queue: Queue) -> None:
    """A job that was running while an older genq moved its entries to ``active`` is listed
    and counted once, as active, and then under the status it settles to."""
    e = await queue.enqueue("p", tenant="t")
    waiting = await queue.enqueue("q", tenant="t")
    calls = ScriptCalls(queue)
    assert await calls.pick(1) == [e.id]
    assert await calls.activate(e.id, "tok") == 0
    k, r = queue.keys, queue.redis
    for key, head in ((k.index, b""), (k.tenant_index, b"t\0")):
        [entry] = [m for m in await r.zrange(key, 0, -1) if m.endswith(e.id.encode())]
        await r.zrem(key, entry)
        await r.zadd(key, {head + b"active" + entry[len(head) + len(b"waiting") :]: 0})
    counts = await queue.job_counts()
    assert (counts["active"], counts["waiting"]) == (1, 1)
    assert [j.id for j in (await queue.jobs(status="active")).jobs] == [e.id]
    assert [j.id for j in (await queue.jobs(status="waiting")).jobs] == [waiting.id]
    await calls.settle(e.id, "tok", "complete", '"ok"')
    counts = await queue.job_counts(tenant="t")
    assert (counts["active"], counts["waiting"], counts["completed"]) == (0, 1, 1)
    assert [j.id for j in (await queue.jobs(status="completed")).jobs] == [e.id]
