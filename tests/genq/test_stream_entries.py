"""The one decoder of a job's stream entries (genq._events.read_entry) and the range read of
a job's stream (Queue.events_range), against a real server."""

from __future__ import annotations

import json

from genq import Queue, StreamEntry, decode_entry


async def test_stream_entry_keeps_the_json_text_and_decodes_to_the_event(queue: Queue) -> None:
    key = queue.keys.events("job")
    usage = json.dumps({"input_tokens": 3})
    await queue.redis.xadd(key, {"type": "chunk", "data": '"a\\nb"'})
    await queue.redis.xadd(key, {"type": "completed", "data": '{"text": "ab"}', "usage": usage})
    raw = await queue.redis.xrange(key)

    entries = await queue.events_range("job")
    assert [(e.type, e.data, e.usage, e.terminal) for e in entries] == [
        ("chunk", '"a\\nb"', None, False),
        ("completed", '{"text": "ab"}', usage, True),
    ]
    for entry, (entry_id, fields) in zip(entries, raw, strict=True):
        assert isinstance(entry, StreamEntry) and entry.id == entry_id.decode()
        assert entry.event(queue.result_codec) == decode_entry(entry_id, fields, queue.result_codec)
    assert entries[1].event(queue.result_codec).usage == {"input_tokens": 3}


async def test_queue_events_range_reads_after_a_cursor_up_to_an_entry(queue: Queue) -> None:
    key = queue.keys.events("job")
    ids = [(await queue.redis.xadd(key, {"type": "chunk", "data": f'"{n}"'})).decode()
           for n in range(5)]  # fmt: skip

    assert [e.id for e in await queue.events_range("job")] == ids
    assert [e.id for e in await queue.events_range("job", ids[0], ids[3])] == ids[1:4]
    assert [e.id for e in await queue.events_range("job", "0-0", count=2)] == ids[:2]
    assert [e.id for e in await queue.events_range("job", ids[4])] == []
    assert await queue.events_range("nothing") == []
