"""Lost attempts: the reclaim of an attempt whose worker was lost files what it streamed (once,
whatever the number of reclaimers), and meter_lost adds its usage where a settle would (once,
whatever the number of meterers)."""

import asyncio
import json

import redis.asyncio as aioredis

from genq import LostAttempt, Queue, UsageRow
from tests.faults.support import ScriptCalls


async def lose_attempt(queue: Queue, chunks: list[str], tenant: str = "acme") -> str:
    """A job whose first attempt streamed ``chunks`` and whose lease then expired."""
    e = await queue.enqueue({"prompt": "hi"}, tenant=tenant, max_attempts=3)
    calls = ScriptCalls(queue)
    assert await calls.pick(holder="w") == [e.id]
    assert await calls.activate(e.id, "t1") == 0
    for seq, chunk in enumerate(chunks, 1):
        assert await calls.emit(e.id, "t1", seq, json.dumps(chunk)) == 0
    await calls.expire_lease(e.id)
    return e.id


async def test_lost_attempt_reclaim_files_its_output_and_meter_lost_counts_it_once(queue):
    job_id = await lose_attempt(queue, ["one ", "two ", "three"])
    assert await ScriptCalls(queue).reclaim(job_id) == [1, b"waiting"]
    (lost,) = await queue.lost_attempts()
    assert lost == LostAttempt(
        job_id, 1, [("chunk", "one "), ("chunk", "two "), ("chunk", "three")], "acme",
        {"prompt": "hi"},
    )  # fmt: skip

    counts = {"prompt_tokens": 5, "completion_tokens": 3}
    assert await queue.meter_lost(job_id, 1, "m/1", counts) is True
    assert await queue.meter_lost(job_id, 1, "m/1", counts) is False  # a retry meters nothing
    assert await queue.lost_attempts() == []
    job = await queue.get(job_id)
    assert job.usage == {**counts, "estimated": True}
    (entry,) = job.history
    assert (entry.outcome, entry.label) == ("lease_expired", "m/1")
    assert entry.usage == {**counts, "estimated": True}
    totals = {**counts, "attempts": 1, "estimated_attempts": 1}
    assert await queue.usage_totals() == [UsageRow(None, "acme", "m/1", totals)]


async def test_lost_attempt_keeps_its_output_past_the_next_attempts_restart(queue):
    job_id = await lose_attempt(queue, ["kept"])
    calls = ScriptCalls(queue)
    await calls.reclaim(job_id)
    assert await calls.pick(holder="w2") == [job_id]
    assert await calls.activate(job_id, "t2") == 0  # trims the stream, writes `restarted`
    assert await calls.emit(job_id, "t2", 1, json.dumps("new")) == 0
    (lost,) = await queue.lost_attempts()
    assert (lost.attempt, lost.output) == (1, [("chunk", "kept")])


async def test_lost_attempt_killed_before_its_first_chunk_is_filed_with_no_output(queue):
    job_id = await lose_attempt(queue, [])
    await ScriptCalls(queue).reclaim(job_id)
    (lost,) = await queue.lost_attempts()
    assert (lost.job_id, lost.attempt, lost.output) == (job_id, 1, [])


async def test_lost_attempt_two_reclaimers_racing_file_it_once_and_meter_it_once(queue, redis_url):
    """Two reclaims on two connections at once, then two meters at once: the scripts'
    atomicity decides, so one of each wins."""
    job_id = await lose_attempt(queue, ["a ", "b"])
    clients = [aioredis.Redis.from_url(redis_url) for _ in range(2)]
    try:
        queues = [Queue(c, queue.prefix) for c in clients]
        replies = await asyncio.gather(*(ScriptCalls(q).reclaim(job_id) for q in queues))
        assert sorted(r[0] for r in replies) == [0, 1]
        (lost,) = await queue.lost_attempts()
        assert lost.output == [("chunk", "a "), ("chunk", "b")]
        counts = {"completion_tokens": 2}
        metered = await asyncio.gather(*(q.meter_lost(job_id, 1, "m", counts) for q in queues))
        assert sorted(metered) == [False, True]
    finally:
        for c in clients:
            await c.aclose()
    job = await queue.get(job_id)
    assert [a.outcome for a in job.history] == ["lease_expired"]
    assert job.usage == {"completion_tokens": 2, "estimated": True}
    assert await queue.usage_totals() == [
        UsageRow(
            None, "acme", "m", {"completion_tokens": 2, "attempts": 1, "estimated_attempts": 1}
        )
    ]


async def test_lost_attempt_of_a_job_whose_record_is_gone_is_dropped_unmetered(queue):
    job_id = await lose_attempt(queue, ["x"])
    await ScriptCalls(queue).reclaim(job_id)
    await queue.redis.delete(queue.keys.job(job_id))
    (lost,) = await queue.lost_attempts()
    assert lost.payload is None
    assert await queue.meter_lost(job_id, 1, "m", {"completion_tokens": 1}) is False
    assert await queue.lost_attempts() == []
    assert await queue.usage_totals() == []


async def test_lost_attempt_of_an_id_enqueued_again_is_dropped_not_charged_to_the_new_job(queue):
    job_id = await lose_attempt(queue, ["x"])
    await ScriptCalls(queue).reclaim(job_id)
    await queue.redis.hset(queue.keys.job(job_id), "history", "[]")  # the id names a new job
    assert await queue.meter_lost(job_id, 1, "m", {"completion_tokens": 1}) is False
    assert await queue.lost_attempts() == []
    assert (await queue.get(job_id)).usage is None
    assert await queue.usage_totals() == []
