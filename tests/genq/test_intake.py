"""The intake: an enqueue appends its ready job to the intake and nothing else; a pick (or
``Queue.admit``, which listings and counts run first) admits the jobs into the ready set, their
tenants' lines and the job index, in order."""

from __future__ import annotations

import pytest

from genq import EnqueueItem, JobStatus, Queue
from tests.faults.invariants import check_fair_share, check_invariants
from tests.faults.support import ScriptCalls, intake_ids
from tests.monitoring import commands_run_by_scripts


async def test_an_enqueue_writes_its_record_and_one_intake_entry_and_nothing_shared(
    redis, redis_url, prefix
) -> None:
    queue = Queue(redis, prefix)
    await queue.enqueue("warm")  # loads the script
    with commands_run_by_scripts(redis_url, prefix) as seen:
        job = await queue.enqueue({"n": 1}, tenant="acme", priority=3)
    # (the first call's ring is still there: no worker waits, so no offer is looked for)
    assert seen == ["hget job:" + job.id, "incr seq", "rpush intake", "hset job:" + job.id,
                    "lpush signal"]  # fmt: skip
    k = queue.keys
    for key in (k.ready, k.lines, k.turns, k.index, k.tenant_index):
        assert await redis.exists(key) == 0, key
    record = await queue.get(job.id)
    assert (record.status, record.tenant, record.priority) == (JobStatus.WAITING, "acme", 3)


async def test_a_pick_admits_the_intake_in_order_and_serves_it_fairly(queue: Queue) -> None:
    a = [e.id for e in await queue.enqueue_many([EnqueueItem(n, tenant="a") for n in range(3)])]
    b = (await queue.enqueue("b", tenant="b")).id
    assert await intake_ids(queue) == [*a, b]
    assert (await queue.stats()).waiting == 4  # the intake counts as waiting

    claimed = await ScriptCalls(queue).pick(2)
    assert claimed == [a[0], b]  # admitted, then one turn each
    assert await intake_ids(queue) == []
    ready = [m.decode() for m in await queue.redis.zrange(queue.keys.ready, 0, -1)]
    assert ready == a[1:]
    assert await check_fair_share(queue) == []


async def test_a_job_cancelled_in_the_intake_is_never_admitted(queue: Queue) -> None:
    kept, cancelled = (await queue.enqueue("kept")).id, (await queue.enqueue("gone")).id
    assert await queue.cancel(cancelled)
    assert await intake_ids(queue) == [kept]
    assert (await queue.get(cancelled)).status is JobStatus.CANCELLED
    assert await queue.admit() == 1
    assert await ScriptCalls(queue).pick(5) == [kept]
    assert (await queue.job_counts())["cancelled"] == 1
    await check_invariants(queue, [kept, cancelled], settled=False)


async def test_listings_and_counts_show_a_job_no_worker_has_picked(queue: Queue) -> None:
    job = await queue.enqueue("waiting", tenant="acme")
    page = await queue.jobs(status="waiting", tenant="acme")
    assert [j.id for j in page.jobs] == [job.id]
    assert (await queue.job_counts())["waiting"] == 1
    assert await intake_ids(queue) == []  # the listing admitted it


async def enqueue_backlog(queue: Queue, count: int, tenant: str) -> list[str]:
    ids: list[str] = []
    for start in range(0, count, 1_000):
        items = [EnqueueItem(n, tenant=tenant) for n in range(start, min(count, start + 1_000))]
        ids += [e.id for e in await queue.enqueue_many(items)]
    return ids


@pytest.mark.timeout(120)
async def test_one_admission_takes_at_most_a_thousand_jobs(queue: Queue) -> None:
    ids = await enqueue_backlog(queue, 2_500, "a")
    k = queue.keys
    admitted, left = await queue.scripts.admit(keys=[k.intake, k.ready, *k.books])
    assert (admitted, left) == (1_000, 1_500)
    assert await queue.admit() == 1_500  # the rest, a call per thousand
    ready = [m.decode() for m in await queue.redis.zrange(k.ready, 0, -1)]
    assert ready == ids  # FIFO across the admissions
    assert (await queue.job_counts())["waiting"] == 2_500
    assert await check_fair_share(queue) == []


@pytest.mark.timeout(120)
async def test_a_pick_claims_only_once_the_whole_intake_is_in_line(queue: Queue) -> None:
    """Behind 2,500 of one tenant's jobs in the intake, another tenant's job is served by the
    same reserve: the pick admits a thousand per call and claims once all are admitted."""
    a = await enqueue_backlog(queue, 2_500, "a")
    b = (await queue.enqueue("b", tenant="b")).id
    k = queue.keys
    first = await queue.scripts.pick(*queue.pick_call(2, 10.0))
    assert (first[0], int(first[3])) == ([], 1)  # admitted a thousand, claimed nothing
    assert await ScriptCalls(queue).pick(2) == [a[0], b]
    assert await queue.redis.llen(k.intake) == 0
    assert await check_fair_share(queue) == []
