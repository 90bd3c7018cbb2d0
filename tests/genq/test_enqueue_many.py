"""Queue.enqueue_many: a pipeline of enqueue.lua calls, one per item, outcomes in order."""

from __future__ import annotations

import contextlib
from urllib.parse import urlparse

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from genq import EnqueueItem, EnqueueManyError, JobExistsError, JobStatus, Queue
from tests.faults.invariants import check_invariants
from tests.faults.proxy import Proxy


async def test_enqueue_many_returns_outcomes_in_item_order(queue):
    done = await queue.enqueue_many([EnqueueItem({"n": n}) for n in range(50)])
    assert len({e.id for e in done}) == 50 and not any(e.deduplicated for e in done)
    for n, e in enumerate(done):
        assert (await queue.get(e.id)).payload == {"n": n}
    # FIFO within one priority follows the batch's order.
    assert [i.decode() for i in await queue.redis.zrange(queue.keys.ready, 0, -1)] == [
        e.id for e in done
    ]


async def test_enqueue_many_empty_batch_sends_nothing(queue):
    assert await queue.enqueue_many([]) == []
    assert await queue.redis.get(queue.keys.seq) is None


async def test_enqueue_many_dedupes_within_one_batch(queue):
    done = await queue.enqueue_many(
        [EnqueueItem({"n": 1}, idempotency_key="k"), EnqueueItem({"n": 2}, idempotency_key="k")]
    )
    assert done[1].id == done[0].id
    assert [e.deduplicated for e in done] == [False, True]
    assert (await queue.stats()).waiting == 1


async def test_enqueue_many_dedupes_across_batches_and_single_enqueue(queue):
    single = await queue.enqueue({"n": 0}, idempotency_key="a")
    first = await queue.enqueue_many([EnqueueItem({"n": 1}, idempotency_key="b")])
    again = await queue.enqueue_many(
        [EnqueueItem({}, idempotency_key="a"), EnqueueItem({}, idempotency_key="b")]
    )
    assert [e.id for e in again] == [single.id, first[0].id]
    assert all(e.deduplicated for e in again)
    assert (await queue.stats()).waiting == 2


async def test_enqueue_many_live_custom_id_fails_alone(queue):
    await queue.enqueue({"old": True}, job_id="taken")
    with pytest.raises(EnqueueManyError) as caught:
        await queue.enqueue_many(
            [EnqueueItem({"n": 1}), EnqueueItem({"n": 2}, job_id="taken"), EnqueueItem({"n": 3})]
        )
    results = caught.value.results
    assert isinstance(results[1], JobExistsError) and results[1].job_id == "taken"
    assert list(caught.value.errors) == [1]
    for n in (0, 2):
        job = await queue.get(results[n].id)
        assert job.status is JobStatus.WAITING and job.payload == {"n": n + 1}
    assert (await queue.get("taken")).payload == {"old": True}


async def test_enqueue_many_bad_options_fail_alone_and_are_not_sent(queue):
    items = [
        EnqueueItem({"n": 1}),
        EnqueueItem({"n": 2}, priority=5000),
        EnqueueItem({"n": 3}, job_id="{braces}"),
        EnqueueItem({"n": 4}, delay=-1),
        EnqueueItem({"n": 5}, job_id="custom"),
    ]
    with pytest.raises(EnqueueManyError) as caught:
        await queue.enqueue_many(items)
    results = caught.value.results
    assert sorted(caught.value.errors) == [1, 2, 3]
    assert all(isinstance(results[i], ValueError) for i in (1, 2, 3))
    assert results[4].id == "custom"
    assert int(await queue.redis.get(queue.keys.seq)) == 2  # only the good items ran
    assert (await queue.stats()).waiting == 2


async def test_enqueue_many_keeps_delays_priorities_and_options(queue):
    done = await queue.enqueue_many(
        [
            EnqueueItem("low", priority=0),
            EnqueueItem("later", delay=30),
            EnqueueItem("high", priority=7, max_attempts=9, job_id="high-1"),
        ]
    )
    stats = await queue.stats()
    assert (stats.waiting, stats.scheduled) == (2, 1)
    assert (await queue.get(done[1].id)).status is JobStatus.SCHEDULED
    high = await queue.get("high-1")
    assert (high.priority, high.max_attempts) == (7, 9)
    ready = await queue.redis.zrange(queue.keys.ready, 0, -1)
    assert [i.decode() for i in ready] == ["high-1", done[0].id]  # priority before FIFO


async def test_enqueue_many_idempotency_ttl_per_item(queue):
    await queue.enqueue_many(
        [
            EnqueueItem(1, idempotency_key="short", idempotency_ttl=5),
            EnqueueItem(2, idempotency_key="default"),
        ]
    )
    short = await queue.get((await queue.enqueue(0, idempotency_key="short")).id)
    default = await queue.get((await queue.enqueue(0, idempotency_key="default")).id)
    assert short.payload == 1 and default.payload == 2
    raw = await queue.redis.hmget(queue.keys.job(short.id), "idem_ttl")
    assert raw == [b"5000"]


async def test_enqueue_many_runs_every_job(queue):
    ran: list[int] = []

    async def handler(job):
        ran.append(job.payload)
        return job.payload

    done = await queue.enqueue_many([EnqueueItem(n) for n in range(20)])
    async with queue.worker(handler, concurrency=4):
        for n, e in enumerate(done):
            assert await queue.wait(e.id, timeout=10) == n
    assert sorted(ran) == list(range(20))


async def test_enqueue_many_after_script_flush_reloads_and_sends_once(queue):
    await queue.redis.script_flush()
    done = await queue.enqueue_many([EnqueueItem(n, idempotency_key=f"k{n}") for n in range(5)])
    assert len({e.id for e in done}) == 5
    assert int(await queue.redis.get(queue.keys.seq)) == 5


async def test_enqueue_many_lost_reply_resent_makes_each_job_once(redis_url, prefix):
    # The reply to the batch is lost after Redis ran it; redis-py reconnects and re-sends the
    # whole pipeline with the same nonces, and every item finds the job it already made.
    port = urlparse(redis_url).port
    async with Proxy(port) as proxy:
        retry = Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), retries=3)
        proxied = aioredis.Redis.from_url(proxy.url, socket_timeout=2.0, retry=retry)
        direct = aioredis.Redis.from_url(redis_url)
        try:
            queue = Queue(proxied, prefix)
            await proxied.script_load(queue.scripts.enqueue.script)
            armed = proxy.drop_next_reply(match=queue.scripts.enqueue.sha.encode())
            items = [EnqueueItem(n, idempotency_key=f"k{n}" if n % 2 else None) for n in range(10)]
            done = await queue.enqueue_many(items)
            await armed.wait(5)
            assert proxy.dropped_replies == 1
            assert not any(e.deduplicated for e in done)
            checked = Queue(direct, prefix)
            assert int(await direct.get(checked.keys.seq)) == 10  # each body ran once
            assert await direct.zcard(checked.keys.ready) == 10
            await check_invariants(checked, [e.id for e in done], settled=False)
        finally:
            for client in (proxied, direct):
                with contextlib.suppress(Exception):
                    await client.aclose()
