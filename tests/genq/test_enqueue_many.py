"""Queue.enqueue_many: enqueue.lua calls of CHUNK items each, written as they are made, outcomes
in item order."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlparse

import pytest
import redis as redis_sync
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff

from genq import Enqueued, EnqueueItem, EnqueueManyError, JobExistsError, JobStatus, Queue
from genq._codecs import JsonCodec
from genq._enqueue import CHUNK
from genq.connection import connect
from tests.faults.invariants import check_invariants
from tests.faults.proxy import Proxy
from tests.faults.support import intake_ids
from tests.polling import waited_for


async def test_enqueue_many_returns_outcomes_in_item_order(queue):
    done = await queue.enqueue_many([EnqueueItem({"n": n}) for n in range(50)])
    assert len({e.id for e in done}) == 50 and not any(e.deduplicated for e in done)
    for n, e in enumerate(done):
        assert (await queue.get(e.id)).payload == {"n": n}
    # FIFO within one priority follows the batch's order, in the intake and once admitted.
    assert await intake_ids(queue) == [e.id for e in done]
    assert await queue.admit() == 50
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
    await queue.admit()
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
            assert await direct.llen(checked.keys.intake) == 10
            await check_invariants(checked, [e.id for e in done], settled=False)
        finally:
            for client in (proxied, direct):
                with contextlib.suppress(Exception):
                    await client.aclose()


async def _evalsha_calls(redis: aioredis.Redis) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


async def _loaded(queue: Queue) -> None:
    """The enqueue script on the server, so a count of EVALSHA calls holds no NOSCRIPT answer
    (the server may have none: a fresh one, or after another test's restart or flush)."""
    await queue.redis.script_load(queue.scripts.enqueue.script)


async def test_enqueue_many_batch_of_100_is_a_few_script_calls(queue):
    await _loaded(queue)
    before = await _evalsha_calls(queue.redis)
    done = await queue.enqueue_many([EnqueueItem({"n": n}) for n in range(100)])
    assert await _evalsha_calls(queue.redis) - before == math.ceil(100 / CHUNK)  # not 100
    k = queue.keys
    assert await intake_ids(queue) == [e.id for e in done]  # FIFO in item order
    assert int(await queue.redis.get(k.seq)) == 100
    assert (await queue.job_counts())["waiting"] == 100  # admitted by the count
    ready = [i.decode() for i in await queue.redis.zrange(k.ready, 0, -1)]
    assert ready == [e.id for e in done]
    assert await queue.redis.zcard(k.lines) == 100
    assert await queue.redis.llen(k.signal) == 100  # one ring per job, for idle workers


class WhenMade(JsonCodec):
    """JSON, and ``on_item(n)`` called as the producer encodes item ``{"n": n}``: a hook into
    the making of a batch's calls."""

    def __init__(self, on_item: Callable[[int], None]) -> None:
        self.on_item = on_item

    def encode(self, value: Any) -> str:
        self.on_item(value["n"])
        return super().encode(value)


async def test_enqueue_many_writes_each_chunk_as_soon_as_it_is_made(redis, redis_url, prefix):
    # The server runs the first chunk while the producer is still making the next one.
    watcher = redis_sync.Redis.from_url(redis_url)
    ran_first: list[bool] = []

    def on_item(n: int) -> None:
        if n == CHUNK:  # the first chunk is made: it must have gone out, and run
            ran_first.append(waited_for(lambda: watcher.llen(queue.keys.intake) == CHUNK))

    queue = Queue(redis, prefix, codec=WhenMade(on_item))
    await redis.script_load(queue.scripts.enqueue.script)  # no NOSCRIPT round first
    try:
        done = await queue.enqueue_many([EnqueueItem({"n": n}) for n in range(3 * CHUNK)])
    finally:
        watcher.close()
    assert ran_first == [True]
    assert len(done) == 3 * CHUNK and await intake_ids(queue) == [e.id for e in done]


async def test_enqueue_many_connection_killed_mid_batch_makes_each_job_once(redis_url, prefix):
    # The batch's connection dies after its first chunk ran: the client's retry (one, as genq
    # gives a Sentinel client) sends every chunk made so far again (the first is recognised by
    # its nonces), then the rest.
    client = connect(redis_url, retry=Retry(NoBackoff(), 1))
    killer = redis_sync.Redis.from_url(redis_url)
    killed: list[int] = []

    def on_item(n: int) -> None:
        if n == CHUNK and not killed:
            assert waited_for(lambda: killer.llen(queue.keys.intake) == CHUNK)
            killed.append(killer.client_kill_filter(_id=batch_connection))

    queue = Queue(client, prefix, codec=WhenMade(on_item))
    await client.script_load(queue.scripts.enqueue.script)
    batch_connection = await client.client_id()  # the pool's one idle connection
    items = [
        EnqueueItem({"n": n}, idempotency_key=f"k{n}" if n % 2 else None) for n in range(3 * CHUNK)
    ]
    try:
        done = await queue.enqueue_many(items)
        assert killed == [1]
        assert len({e.id for e in done}) == 3 * CHUNK and not any(e.deduplicated for e in done)
        assert int(await client.get(queue.keys.seq)) == 3 * CHUNK  # each body ran once
        assert await intake_ids(queue) == [e.id for e in done]
        for n, e in enumerate(done):
            assert (await queue.get(e.id)).payload == {"n": n}
        await check_invariants(queue, [e.id for e in done], settled=False)
    finally:
        killer.close()
        await client.aclose()


async def test_enqueue_many_payload_the_codec_refuses_fails_alone(queue):
    items = [EnqueueItem({"n": n}) for n in range(2 * CHUNK)]
    items[CHUNK + 3] = EnqueueItem({"n": object()})  # JSON cannot encode it
    with pytest.raises(EnqueueManyError) as caught:
        await queue.enqueue_many(items)
    results = caught.value.results
    assert isinstance(results[CHUNK + 3], TypeError)
    made = [r for r in results if isinstance(r, Enqueued)]
    assert len(made) == 2 * CHUNK - 1 and (await queue.stats()).waiting == 2 * CHUNK - 1


async def test_enqueue_many_iterable_that_raises_sends_nothing(queue):
    def items() -> Iterator[EnqueueItem]:
        for n in range(3 * CHUNK):
            if n == 2 * CHUNK:
                raise RuntimeError("the producer's source failed")
            yield EnqueueItem({"n": n})

    with pytest.raises(RuntimeError, match="source failed"):
        await queue.enqueue_many(items())
    assert (await queue.stats()).waiting == 0
    assert await queue.redis.get(queue.keys.seq) is None


async def test_enqueue_many_large_batch_goes_in_chunks_of_one_round_trip(queue):
    n = 2 * CHUNK + 1
    await _loaded(queue)
    before = await _evalsha_calls(queue.redis)
    done = await queue.enqueue_many(
        [EnqueueItem(i, idempotency_key=f"k{i % (n - 5)}") for i in range(n)]
    )
    assert await _evalsha_calls(queue.redis) - before == 3
    # The last five items share keys with the first five, across chunks: deduplicated.
    assert [e.deduplicated for e in done[-5:]] == [True] * 5
    assert [e.id for e in done[-5:]] == [e.id for e in done[:5]]
    assert not any(e.deduplicated for e in done[:-5])
    assert await intake_ids(queue) == [e.id for e in done[:-5]]
    assert int(await queue.redis.get(queue.keys.seq)) == n - 5


async def test_enqueue_record_leaves_out_defaults_and_reads_them_back(queue):
    plain = await queue.enqueue({"n": 1})
    raw = await queue.redis.hgetall(queue.keys.job(plain.id))
    fields = {f.decode() for f in raw}
    for default in ("attempt", "progress", "cancel_requested", "out", "eseq", "priority",
                    "tenant", "updated_at", "run_at"):  # fmt: skip
        assert default not in fields
    # created_at is the server's clock in ms, written as digits (the seconds, then the
    # microseconds' first three of six).
    seconds, micros = await queue.redis.time()
    assert 0 <= seconds * 1000 + micros // 1000 - int(raw[b"created_at"]) < 5000
    job = await queue.get(plain.id)
    assert (job.attempt, job.priority, job.tenant, job.progress) == (0, 0, "", None)
    assert not job.cancel_requested and job.history == ()
    assert job.updated_at == job.run_at == job.created_at > 0

    full = await queue.enqueue({"n": 2}, priority=-3, delay=30, tenant="acme")
    job = await queue.get(full.id)
    assert (job.priority, job.tenant, job.status) == (-3, "acme", JobStatus.SCHEDULED)
    assert job.run_at == pytest.approx(job.created_at + 30, abs=0.01)


async def _state(queue: Queue) -> dict[str, object]:
    """Everything enqueue writes, with the clock's readings left out."""
    k, r = queue.keys, queue.redis
    ignored = {b"created_at", b"updated_at", b"run_at", b"nonce"}
    intake = await intake_ids(queue)
    await queue.admit()
    records = {}
    for raw_id in await r.zrange(k.index, 0, -1):
        job_id = raw_id.split(b"\0")[-1].decode()
        raw = await r.hgetall(k.job(job_id))
        records[job_id] = {f: v for f, v in raw.items() if f not in ignored}

    def untimed(entries: list[bytes]) -> list[bytes]:  # "<...>\0<created ms>\0<id>"
        return sorted(b"\0".join(e.split(b"\0")[:-2] + e.split(b"\0")[-1:]) for e in entries)

    return {
        "intake": intake,
        "records": records,
        "ready": await r.zrange(k.ready, 0, -1, withscores=True),
        "lines": await r.zrange(k.lines, 0, -1),
        "turns": await r.zrange(k.turns, 0, -1, withscores=True),
        "scheduled": await r.zrange(k.scheduled, 0, -1),
        "rank": await r.hgetall(k.rank),
        "index": untimed(await r.zrange(k.index, 0, -1)),
        "tindex": untimed(await r.zrange(k.tenant_index, 0, -1)),
        "seq": await r.get(k.seq),
        "dead": await r.zrange(k.dead, 0, -1),
        "keys": sorted([await r.get(k.idempotency(key)) for key in ("a", "b", "c")], key=str),
    }


async def test_enqueue_many_writes_what_one_by_one_enqueues_write(redis, prefix):
    """A batch and the same items enqueued one at a time leave the same state behind."""
    items = [
        EnqueueItem("p1", job_id="j1"),
        EnqueueItem("p2", job_id="j2", tenant="acme", priority=5),
        EnqueueItem("p3", job_id="j3", idempotency_key="a", tenant="beta"),
        EnqueueItem("p4", job_id="j4", idempotency_key="a"),  # deduplicated by j3
        EnqueueItem("p5", job_id="j5", delay=60, tenant="acme", max_attempts=7),
        EnqueueItem("p6", job_id="done", idempotency_key="b"),  # a finished job, started clean
        EnqueueItem("p7", job_id="live"),  # live: refused
        EnqueueItem("p8", job_id="j1"),  # made by an earlier item: refused
        EnqueueItem("p9", job_id="j9", idempotency_key="c", priority=-2, idempotency_ttl=9),
    ]
    states, outcomes = [], []
    for batched in (True, False):
        queue = Queue(redis, f"{prefix}-{batched}")
        await queue.enqueue("old", job_id="done")
        await queue.cancel("done")
        await queue.enqueue("old", job_id="live")
        if batched:
            with pytest.raises(EnqueueManyError) as caught:
                await queue.enqueue_many(items)
            results = caught.value.results
        else:
            results = []
            for item in items:
                try:
                    results.append(await queue.enqueue(**vars(item)))
                except JobExistsError as exc:
                    results.append(exc)
        outcomes.append([r if isinstance(r, Enqueued) else type(r) for r in results])
        states.append(await _state(queue))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][3].deduplicated and outcomes[0][3].id == "j3"
    assert outcomes[0][6] is JobExistsError and outcomes[0][7] is JobExistsError
    assert states[0] == states[1]
    records = states[0]["records"]
    assert records["done"][b"payload"] == b'"p6"' and records["done"][b"status"] == b"waiting"
    assert records["live"][b"payload"] == b'"old"' and records["j1"][b"payload"] == b'"p1"'


async def test_enqueue_many_of_only_bad_items_needs_no_server():
    # Nothing to send: the batch fails on its items alone, without a connection.
    queue = Queue(connect("redis://127.0.0.1:1"), "nowhere")
    with pytest.raises(EnqueueManyError) as caught:
        await queue.enqueue_many([EnqueueItem({}, priority=5000)])
    assert isinstance(caught.value.results[0], ValueError)
    await queue.redis.aclose()


async def test_enqueue_many_on_a_single_connection_client(redis_url, prefix):
    client = connect(redis_url, single_connection_client=True)
    try:
        queue = Queue(client, prefix)
        done = await queue.enqueue_many([EnqueueItem({"n": n}) for n in range(2 * CHUNK + 3)])
        assert await intake_ids(queue) == [e.id for e in done] and len(done) == 2 * CHUNK + 3
    finally:
        await client.aclose()
