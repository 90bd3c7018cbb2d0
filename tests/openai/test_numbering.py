"""Entry ordinals (gateway.openai.numbering, from genq.Queue.retained_events) against a real
server: they survive a restart's trim and the stream's MAXLEN, because Redis counts every entry
ever added."""

from __future__ import annotations

import redis.asyncio as aioredis

from gateway.openai.numbering import retained
from genq import Queue


async def add(redis: aioredis.Redis, key: str, kind: str, data: str = '"x"') -> str:
    entry_id = await redis.xadd(key, {"type": kind, "data": data})
    return entry_id.decode()


async def test_numbering_ordinals_keep_growing_across_a_restart_trim(
    redis: aioredis.Redis, prefix: str
) -> None:
    queue = Queue(redis, prefix)
    key = queue.keys.events("job")
    assert await retained(queue, "job") == []
    for _ in range(3):
        await add(redis, key, "chunk")
    assert [n.ordinal for n in await retained(queue, "job")] == [0, 1, 2]
    await redis.xtrim(
        key, maxlen=0, approximate=False
    )  # what genq's restart does, then it writes `restarted`
    restarted = await add(redis, key, "restarted", "null")
    await add(redis, key, "chunk")
    after = await retained(queue, "job")
    assert [(n.ordinal, n.entry.type) for n in after] == [(3, "restarted"), (4, "chunk")]
    assert await queue.event_ordinal("job", restarted) == 3


async def test_numbering_ordinals_survive_maxlen_trimming(
    redis: aioredis.Redis, prefix: str
) -> None:
    queue = Queue(redis, prefix)
    key = queue.keys.events("job")
    ids = [await add(redis, key, "chunk") for _ in range(10)]
    await redis.xtrim(key, maxlen=4, approximate=False)
    kept = await retained(queue, "job")
    assert [n.ordinal for n in kept] == [6, 7, 8, 9]
    assert [n.entry.id for n in kept] == ids[6:]
    assert await queue.event_ordinal("job", ids[0]) is None  # no longer the first entry
