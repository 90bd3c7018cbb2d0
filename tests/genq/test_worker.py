import asyncio

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from genq import JobStatus, Queue, Worker, connect


async def test_worker_emit_and_progress_reach_the_stream(queue):
    e = await queue.enqueue({"prompt": "x"})

    async def handler(job):
        assert job.payload == {"prompt": "x"} and job.attempt == 1 and job.max_attempts == 3
        await job.emit("Hello ")
        await job.progress(0.5)
        await job.emit({"structured": True})
        return {"text": "Hello"}

    async with queue.worker(handler):
        assert await queue.wait(e.id, timeout=10) == {"text": "Hello"}
    events = [(ev.type, ev.data) async for ev in queue.watch(e.id)]
    assert events == [
        ("chunk", "Hello "),
        ("progress", 0.5),
        ("chunk", {"structured": True}),
        ("completed", {"text": "Hello"}),
    ]
    job = await queue.get(e.id)
    assert job.status is JobStatus.COMPLETED and job.progress == 1.0
    assert job.started_at and job.finished_at and job.finished_at >= job.started_at


async def test_worker_auto_heartbeat_keeps_quiet_handler_alive(redis, prefix):
    queue = Queue(redis, prefix, lease=0.6)
    e = await queue.enqueue("slow")
    attempts = []

    async def handler(job):
        attempts.append(job.attempt)
        await asyncio.sleep(2.0)  # more than three leases without a single emit
        return "finished"

    async with queue.worker(handler, heartbeat=0.15):
        assert await queue.wait(e.id, timeout=10) == "finished"
    assert attempts == [1]


async def test_worker_graceful_stop_lets_running_job_finish(queue):
    e = await queue.enqueue("p")
    started = asyncio.Event()

    async def handler(job):
        started.set()
        await asyncio.sleep(0.5)
        return "kept"

    worker = await queue.worker(handler).start()
    await asyncio.wait_for(started.wait(), 5)
    await worker.stop()
    job = await queue.get(e.id)
    assert job.status is JobStatus.COMPLETED and job.result == "kept"


async def test_worker_stop_takes_no_new_jobs(queue):
    async def handler(job):
        return 1

    worker = await queue.worker(handler).start()
    await worker.stop()
    e = await queue.enqueue("after stop")
    await asyncio.sleep(0.2)
    assert (await queue.get(e.id)).status is JobStatus.WAITING


async def test_worker_stop_deadline_hands_job_back_without_spending_attempt(queue):
    e = await queue.enqueue("p")
    started = asyncio.Event()

    async def stuck(job):
        started.set()
        await job.emit("partial")
        await asyncio.sleep(60)

    worker = await queue.worker(stuck).start()
    await asyncio.wait_for(started.wait(), 5)
    await worker.stop(deadline=0.2)
    job = await queue.get(e.id)
    assert job.status is JobStatus.WAITING and job.attempt == 0

    async def quick(job):
        await job.emit("fresh")
        return "done"

    async with queue.worker(quick):
        assert await queue.wait(e.id, timeout=10) == "done"
    types = [(ev.type, ev.data) async for ev in queue.watch(e.id)]
    assert types == [("restarted", None), ("chunk", "fresh"), ("completed", "done")]
    assert (await queue.get(e.id)).attempt == 1


async def test_worker_idle_blocks_on_doorbell_instead_of_polling(queue, redis):
    async def handler(job):
        return None

    before = await redis.info("commandstats")
    async with queue.worker(handler, concurrency=4, poll=1.0):
        await asyncio.sleep(1.5)
        e = await queue.enqueue("wake")
        assert await queue.wait(e.id, timeout=5) is None
    after = await redis.info("commandstats")

    def calls(stats, name):
        return stats.get(f"cmdstat_{name}", {}).get("calls", 0)

    evals = calls(after, "evalsha") - calls(before, "evalsha")
    # A polling loop would have run hundreds of picks in 1.5 s; a blocked one runs a handful.
    assert evals < 30, evals
    assert calls(after, "blpop") > calls(before, "blpop")


async def test_worker_holds_its_three_connections_from_the_start_and_refuses_a_smaller_pool(
    queue, redis, redis_url
):
    async def handler(job):
        return None

    for size in (1, 3):
        with pytest.raises(ValueError, match=f"more than 3 connections.*holds {size}"):
            Queue(connect(redis_url, max_connections=size), queue.prefix).worker(handler)

    async def take(pool, count):
        return [await pool.get_connection() for _ in range(count)]

    client = connect(redis_url, pool_timeout=0.3, max_connections=4)
    pool = client.connection_pool
    try:
        async with Queue(client, queue.prefix).worker(handler, concurrency=4):
            async with asyncio.timeout(5):  # the cancel channel subscribes from its own task
                while (await redis.pubsub_numsub(queue.keys.cancels))[0][1] < 1:
                    await asyncio.sleep(0.01)
            # The doorbell, the presence and the cancel channel hold one each, before any job
            # ran: one connection is left, for the jobs' calls.
            (mine,) = await take(pool, 1)
            with pytest.raises(RedisConnectionError, match="No connection available"):
                await take(pool, 1)
            await pool.release(mine)
            job = await queue.enqueue("one")
            assert await queue.wait(job.id, timeout=5) is None
        held = await take(pool, 4)  # a stopped worker gave them back
        for connection in held:
            await pool.release(connection)
    finally:
        await client.aclose()
        await pool.aclose()


async def test_worker_result_that_cannot_be_encoded_dead_letters(queue):
    e = await queue.enqueue("p")

    async def handler(job):
        return object()

    async with queue.worker(handler):
        with pytest.raises(Exception, match="could not be encoded"):
            await queue.wait(e.id, timeout=10)
    assert (await queue.dead_entries())[0].reason == "terminal"


async def test_worker_emit_many_batches_jobs_and_keeps_emit_meaning(queue):
    from genq import JobLeaseLostError, emit_many

    ids = [(await queue.enqueue(n)).id for n in ("a", "b", "c")]
    jobs = {}
    all_started = asyncio.Event()
    release = asyncio.Event()

    async def handler(job):
        jobs[job.payload] = job
        if len(jobs) == 3:
            all_started.set()
        await release.wait()
        return job.payload

    async with queue.worker(handler, concurrency=3):
        await asyncio.wait_for(all_started.wait(), 5)
        await queue.redis.hset(queue.keys.job(jobs["b"].id), "token", "stolen")
        await queue.redis.hset(queue.keys.job(jobs["c"].id), "cancel_requested", 1)
        results = await emit_many([(jobs[n], f"{n}-1") for n in ("a", "b", "c")])
        assert results[0] is None and isinstance(results[1], JobLeaseLostError)
        assert results[2] is None and jobs["c"].signal.is_set()
        release.set()
        assert await queue.wait(ids[0], timeout=5) == "a"
    assert [ev.data async for ev in queue.watch(ids[0])] == ["a-1", "a"]


async def test_worker_settles_arriving_together_share_round_trips(queue, redis):
    # Ten handlers end while the server holds writes: the first settle waits in flight, the
    # nine that arrive meanwhile go together in the next round trip, each still settled.
    release = asyncio.Event()
    started: list[str] = []

    async def handler(job):
        started.append(job.id)
        await release.wait()
        return f"done {job.payload['n']}"

    ids = [(await queue.enqueue({"n": n})).id for n in range(10)]
    async with queue.worker(handler, concurrency=10) as worker:
        for _ in range(500):
            if len(started) == 10:
                break
            await asyncio.sleep(0.01)
        assert sorted(started) == sorted(ids)
        await redis.execute_command("CLIENT", "PAUSE", 500, "WRITE")
        release.set()
        results = [await queue.wait(job_id, timeout=15) for job_id in ids]
    assert results == [f"done {n}" for n in range(10)]
    assert worker.settles.settled == 10
    assert worker.settles.round_trips <= 3  # one each would be 10
    for job_id in ids:
        assert (await queue.get(job_id)).status == JobStatus.COMPLETED


async def test_a_job_whose_handler_ended_takes_no_slot_while_it_settles(queue):
    # One slot. The first job's settle is held on its way (the worker's own settle call waits
    # for the test); the second job starts meanwhile, and never beside the first's handler.
    running, most, started = 0, 0, []

    async def handler(job):
        nonlocal running, most
        running += 1
        most = max(most, running)
        started.append(job.payload["n"])
        await asyncio.sleep(0.05)
        running -= 1
        return job.payload["n"]

    first = await queue.enqueue({"n": 1})
    second = await queue.enqueue({"n": 2})
    worker = Worker(queue, handler, concurrency=1)
    settle, held = worker.settles.run, asyncio.Event()

    async def held_settle(call):
        await held.wait()
        return await settle(call)

    worker.settles.run = held_settle
    await worker.start()
    try:
        for _ in range(500):
            if len(started) == 2:
                break
            await asyncio.sleep(0.01)
        assert started == [1, 2]  # the second began while the first's settle was held
        assert (await queue.get(first.id)).status is JobStatus.ACTIVE
        held.set()
        assert await queue.wait(first.id, timeout=10) == 1
        assert await queue.wait(second.id, timeout=10) == 2
    finally:
        held.set()
        await worker.stop()
    assert most == 1
