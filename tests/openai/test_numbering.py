"""Entry ordinals (gateway.openai.numbering, from genq.Queue.retained_events) against a real
server: they survive a restart's trim and the stream's MAXLEN, because Redis counts every entry
ever added. And the Responses events' numbers (``EventNumbers``): without a gap for text,
growing across a restart, the same for a reader that starts at the restart as for one that read
it live."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import cast

import redis.asyncio as aioredis

from gateway.openai.numbering import retained
from gateway.openai.response_events import EventNumbers
from gateway.openai.response_items import StreamItems
from genq import Job, Queue, StreamEntry


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


def numbered_kinds(entries: list[tuple[int, StreamEntry]]) -> list[tuple[int, str]]:
    """``(sequence_number, event type)`` of each event the entries give, as a stream numbers
    them from the first entry it reads."""
    job = cast(Job, SimpleNamespace(id="openai.abc"))  # the items read its id alone
    items, numbers, out = StreamItems(job), EventNumbers(), []
    for ordinal, entry in entries:
        first = numbers.first(ordinal, entry.type)
        events = items.events(entry)
        numbers.gave(len(events))
        out += [(first + n, kind) for n, (kind, _) in enumerate(events)]
    return out


def test_event_numbers_grow_across_a_restart_and_a_resumer_numbers_alike() -> None:
    call = {"index": 0, "id": "call_1", "name": "f"}
    attempt = [
        StreamEntry("1-0", "reasoning", '"think"'),
        StreamEntry("2-0", "chunk", '"hi"'),
        StreamEntry("3-0", "tool_call", json.dumps(call)),
        StreamEntry("4-0", "tool_args", json.dumps({"index": 0, "delta": "{}"})),
        StreamEntry("5-0", "tool_done", json.dumps({**call, "arguments": "{}"})),
    ]
    retry = [StreamEntry("6-0", "restarted", "null"), *attempt]
    live = numbered_kinds([*enumerate(attempt), *enumerate(retry, start=len(attempt))])
    numbers = [n for n, _ in live]
    assert numbers == sorted(set(numbers))
    assert numbers[:8] == list(range(5, 13))  # the first attempt: no gap
    resumed = numbered_kinds(list(enumerate(retry, start=len(attempt))))  # after the trim
    assert resumed == live[8:]
    text_only = [StreamEntry(f"{n}-0", "chunk", '"x"') for n in range(1, 4)]
    assert [n for n, _ in numbered_kinds(list(enumerate(text_only)))] == [5, 6, 7]
