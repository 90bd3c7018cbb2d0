"""A layer's admission, the enqueue it admits and the layer's release, written together
(``genq.enqueue_admitted``)."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from genq import EnqueueItem, Queue, as_text, enqueue_admitted

READ = "return {KEYS[1], redis.call('GET', KEYS[2]), redis.call('GET', KEYS[3])}"
ADMIT = "if ARGV[2] == 'yes' then redis.call('ZADD', KEYS[1], 1, ARGV[1]) end return ARGV[2]"
TAKE = "return redis.call('DEL', KEYS[1])"


async def test_admission_sees_the_binding_in_each_queue(redis, prefix) -> None:
    first, second = Queue(redis, f"{prefix}:a"), Queue(redis, f"{prefix}:b")
    bound = await second.enqueue({"n": 1}, idempotency_key="k-1")
    script = redis.register_script(READ)
    admitted_in = f"{prefix}:admitted"

    async def read(key: str) -> list[object]:
        item = EnqueueItem({"n": 2}, idempotency_key=key, job_id=f"job-{key}")
        sent = await enqueue_admitted(
            first, item, (script, [f"{prefix}:mine"], []), admitted_in, bound_in=[first, second]
        )
        assert sent.enqueued is None  # the script admitted nothing
        return sent.admission

    reply = await read("k-1")
    assert [as_text(reply[0]), reply[1], as_text(reply[2])] == [f"{prefix}:mine", None, bound.id]
    assert (await read("k-2"))[1:] == [None, None]


@pytest.mark.parametrize("pooled", [True, False], ids=["one-write", "one-by-one"])
async def test_enqueued_only_when_admitted_and_released_either_way(
    redis_url: str, prefix: str, pooled: bool
) -> None:
    # A client holding one connection of its own has no pooled write path: one call each.
    client = aioredis.Redis.from_url(redis_url, single_connection_client=not pooled)
    try:
        queue = Queue(client, prefix)
        admitted_in, held = f"{prefix}:admitted", f"{prefix}:held"
        admit, take = client.register_script(ADMIT), client.register_script(TAKE)
        await client.script_flush()  # every script unknown to the server: loaded, sent again

        async def send(job_id: str, verdict: str) -> object:
            await client.set(held, "1")
            item = EnqueueItem({"n": 1}, idempotency_key=f"k-{job_id}", job_id=job_id)
            return await enqueue_admitted(
                queue, item, (admit, [admitted_in], [job_id, verdict]), admitted_in,
                release=(take, [held], []),
            )  # fmt: skip

        refused = await send("refused-job", "no")
        assert (as_text(refused.admission), refused.enqueued, refused.release) == ("no", None, 1)
        assert await queue.get("refused-job") is None
        assert await client.get(queue.keys.idempotency("k-refused-job")) is None
        assert await queue.stats() == await Queue(client, f"{prefix}:empty").stats()

        admitted = await send("admitted-job", "yes")
        assert as_text(admitted.admission) == "yes" and admitted.release == 1
        assert admitted.enqueued is not None
        assert (admitted.enqueued.id, admitted.enqueued.deduplicated) == ("admitted-job", False)
        job = await queue.get("admitted-job")
        assert job is not None and job.idempotency_key == "k-admitted-job"
        assert await client.exists(held) == 0
    finally:
        await client.aclose()


async def test_enqueue_admitted_needs_the_jobs_id(redis, prefix) -> None:
    queue = Queue(redis, prefix)
    script = redis.register_script(ADMIT)
    with pytest.raises(ValueError, match="job_id"):
        await enqueue_admitted(queue, EnqueueItem({"n": 1}), (script, [], []), f"{prefix}:a")


@pytest.mark.parametrize("pooled", [True, False], ids=["one-write", "one-by-one"])
async def test_read_back_gives_the_job_as_get_reads_it_and_nothing_else(
    redis_url: str, prefix: str, pooled: bool
) -> None:
    """With ``read_back`` an admitted new job comes back as ``Queue.get`` reads it (in the same
    write where there is one); a refused one, or a key bound to another job, gives none."""
    client = aioredis.Redis.from_url(redis_url, single_connection_client=not pooled)
    try:
        queue = Queue(client, prefix)
        admitted_in = f"{prefix}:admitted"
        admit = client.register_script(ADMIT)

        async def send(job_id: str, verdict: str, key: str) -> object:
            item = EnqueueItem({"n": job_id}, idempotency_key=key, job_id=job_id, priority=3)
            return await enqueue_admitted(
                queue, item, (admit, [admitted_in], [job_id, verdict]), admitted_in,
                read_back=True,
            )  # fmt: skip

        made = await send("new-job", "yes", "k-1")
        assert made.job is not None
        assert made.job == await queue.get("new-job")
        assert (made.job.payload, made.job.priority) == ({"n": "new-job"}, 3)
        refused = await send("refused-job", "no", "k-2")
        assert (refused.enqueued, refused.job) == (None, None)
        replay = await send("other-job", "yes", "k-1")  # the key is bound to new-job
        assert replay.enqueued is not None and replay.enqueued.deduplicated
        assert (replay.enqueued.id, replay.job) == ("new-job", None)
    finally:
        await client.aclose()
