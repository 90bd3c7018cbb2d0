import asyncio

from genq import Queue


async def _keys(redis, prefix):
    return sorted(k.decode() for k in await redis.keys(f"*{prefix}*"))


async def test_keys_all_share_the_queue_hash_tag(redis, prefix):
    queue = Queue(redis, prefix, backoff=0.01, max_backoff=0.02)
    done = await queue.enqueue("a", idempotency_key="k1")
    await queue.enqueue("b", delay=60)
    dead = await queue.enqueue("c", max_attempts=1)

    async def handler(job):
        await job.emit("x")
        if job.payload == "c":
            raise RuntimeError("dies")
        return "ok"

    async with queue.worker(handler):
        await queue.wait(done.id, timeout=5)
        await asyncio.wait_for(_until_dead(queue, dead.id), 5)
    await queue.cooldown(1)
    keys = await _keys(redis, prefix)
    assert keys and all(k.startswith("{" + prefix + "}:") for k in keys), keys


async def _until_dead(queue, job_id):
    while job_id not in await queue.dead():
        await asyncio.sleep(0.02)


async def test_keys_stream_length_is_bounded(redis, prefix):
    queue = Queue(redis, prefix, events_max_len=100)
    e = await queue.enqueue("p")

    async def handler(job):
        for i in range(1000):
            await job.emit(i)
        return "done"

    async with queue.worker(handler):
        await queue.wait(e.id, timeout=20)
    length = await redis.xlen(queue.keys.events(e.id))
    assert length < 300  # MAXLEN ~ trims in whole macro-nodes
    events = [ev async for ev in queue.watch(e.id)]
    assert events[-1].type == "completed" and events[-2].data == 999


async def test_keys_finished_jobs_leave_no_keys_after_retention(redis, prefix):
    queue = Queue(redis, prefix, result_ttl=0.5, dead_ttl=0.5, backoff=0.01, max_backoff=0.02)
    ok = await queue.enqueue("ok", idempotency_key="a")
    bad = await queue.enqueue("bad", idempotency_key="b", max_attempts=1)
    cancelled = await queue.enqueue("cancel me", idempotency_key="c", delay=30)
    assert await queue.cancel(cancelled.id)

    async def handler(job):
        await job.emit("t")
        if job.payload == "bad":
            raise RuntimeError("no")
        return 1

    async with queue.worker(handler):
        await queue.wait(ok.id, timeout=5)
        await asyncio.wait_for(_until_dead(queue, bad.id), 5)
        await asyncio.sleep(1.5)  # the idle worker's next pick trims the dead set
    # the sequence counter and the dead-letter outbox (bounded, read by alerts) stay by design
    leftover = [k for k in await _keys(redis, prefix) if not k.endswith((":seq", ":outbox"))]
    assert leftover == []


async def test_cooldown_pauses_reserving_then_resumes(queue):
    remaining = await queue.cooldown(0.6)
    assert 0.4 < remaining <= 0.6
    assert await queue.cooldown(0.1) >= 0.4  # a shorter one does not cut it short
    e = await queue.enqueue("p")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    started = []

    async def handler(job):
        started.append(loop.time() - t0)

    async with queue.worker(handler):
        await queue.wait(e.id, timeout=5)
    assert started[0] >= 0.35
    assert await queue.cooldown_remaining() == 0


async def test_clear_cooldown_resumes_reserving_at_once(queue):
    await queue.cooldown(60)
    e = await queue.enqueue("p")
    started = asyncio.Event()

    async def handler(job):
        started.set()

    # A long poll: only the doorbell the clear rings can wake the idle worker in time.
    async with queue.worker(handler, poll=30):
        await asyncio.sleep(0.3)
        assert not started.is_set()
        assert 59 < await queue.clear_cooldown() <= 60
        await asyncio.wait_for(queue.wait(e.id), 2)
    assert await queue.cooldown_remaining() == 0
    assert await queue.clear_cooldown() == 0
