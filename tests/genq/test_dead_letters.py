import asyncio
import json

import pytest

from genq import JobFailedError, JobStatus, Queue, TerminalJobError, decode_entry


async def _dead_job(queue, payload="p", key=None):
    e = await queue.enqueue(payload, max_attempts=1, idempotency_key=key)

    async def handler(job):
        await job.emit("doomed text")
        raise TerminalJobError("provider said 400")

    async with queue.worker(handler):
        with pytest.raises(JobFailedError):
            await queue.wait(e.id, timeout=5)
    return e.id


async def _retained(queue, job_id):
    """The stream as it is now (watch() would wait for a job that is not finished)."""
    entries = await queue.redis.xrange(queue.keys.events(job_id))
    return [decode_entry(i, f, queue.result_codec) for i, f in entries]


async def test_dead_letters_listed_with_reason_and_stats(queue):
    job_id = await _dead_job(queue)
    assert await queue.dead() == [job_id]
    [entry] = await queue.dead_entries()
    assert entry.reason == "terminal" and entry.error == "provider said 400"
    assert entry.attempts == 1 and entry.died_at > 0
    assert (await queue.stats()).dead == 1


async def test_dead_letters_retry_clears_output_and_resets_attempts(queue):
    job_id = await _dead_job(queue, key="dk")
    assert await queue.retry_dead(job_id)
    job = await queue.get(job_id)
    assert job.status is JobStatus.WAITING and job.attempt == 0
    assert await queue.dead() == []
    assert [ev.type for ev in await _retained(queue, job_id)] == ["restarted"]
    assert (await queue.enqueue("p", idempotency_key="dk")).id == job_id  # key bound again

    async def handler(job):
        assert job.attempt == 1
        await job.emit("fresh text")
        return "ok"

    async with queue.worker(handler):
        assert await queue.wait(job_id, timeout=5) == "ok"
    events = [(ev.type, ev.data) async for ev in queue.watch(job_id)]
    assert events == [("restarted", None), ("chunk", "fresh text"), ("completed", "ok")]
    assert await queue.retry_dead(job_id) is False


async def test_dead_letters_purge_some_or_all(queue):
    ids = [await _dead_job(queue, payload=i) for i in range(3)]
    assert await queue.purge_dead([ids[0]]) == 1
    assert await queue.get(ids[0]) is None
    assert not await queue.redis.exists(queue.keys.events(ids[0]))
    assert await queue.purge_dead() == 2
    assert await queue.dead() == [] and (await queue.stats()).dead == 0
    assert await queue.purge_dead(["unknown"]) == 0


async def test_dead_letters_keep_their_own_retention(redis, prefix):
    queue = Queue(redis, prefix, result_ttl=30, dead_ttl=3600)
    job_id = await _dead_job(queue)
    ttl = await redis.pttl(queue.keys.job(job_id))
    assert 3_500_000 < ttl <= 3_600_000
    assert await redis.pttl(queue.keys.events(job_id)) == pytest.approx(ttl, abs=1000)


async def test_dead_letters_expired_entries_leave_the_listing(redis, prefix):
    queue = Queue(redis, prefix, dead_ttl=0.3)
    first = await _dead_job(queue, payload=1)
    await asyncio.sleep(0.5)
    assert [e.id for e in await queue.dead_entries()] == []  # record expired
    second = await _dead_job(queue, payload=2)
    assert await queue.dead() == [second]  # the next death trimmed the stale entry
    assert first not in await queue.dead()


async def test_dead_letters_are_announced_on_the_channel(queue, redis):
    pubsub = redis.pubsub()
    await pubsub.subscribe(queue.keys.dead_letters)
    await pubsub.get_message(timeout=1)  # the subscribe confirmation
    job_id = await _dead_job(queue)
    message = None
    for _ in range(50):
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if message:
            break
    await pubsub.aclose()
    notice = json.loads(message["data"])
    assert notice["id"] == job_id and notice["reason"] == "terminal"
    assert notice["error"] == "provider said 400" and notice["attempts"] == 1
