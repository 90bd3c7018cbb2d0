"""Events of a handler's own types: emitted in order beside the chunks, validated, resumable."""

from __future__ import annotations

import pytest

from genq import CHUNK, EventTypeError, emit_many, visible_text

WRITTEN = [
    ("reasoning", "Let me think"),
    ("reasoning", " about it."),
    (CHUNK, "Hel"),
    ("tool_call", {"index": 0, "id": "c1", "name": "f"}),
    ("tool_args", {"index": 0, "delta": '{"a": '}),
    (CHUNK, "lo"),
    ("tool_args", {"index": 0, "delta": "1}"}),
    ("tool_done", {"index": 0, "id": "c1", "name": "f", "arguments": '{"a": 1}'}),
]


async def test_emit_appends_each_type_in_order(queue) -> None:
    e = await queue.enqueue("p")

    async def handler(job) -> str:
        for kind, data in WRITTEN:
            await job.emit(data, type=kind)
        return "done"

    async with queue.worker(handler):
        assert await queue.wait(e.id, timeout=5) == "done"
    events = [event async for event in queue.watch(e.id)]
    assert [(ev.type, ev.data) for ev in events[:-1]] == WRITTEN
    assert visible_text(events) == "Hello"  # the text rule sees the chunks only


async def test_emit_many_items_carry_their_type(queue) -> None:
    e = await queue.enqueue("p")

    async def handler(job) -> None:
        items = [(job, data) if kind == CHUNK else (job, data, kind) for kind, data in WRITTEN]
        assert await emit_many(items) == [None] * len(WRITTEN)

    async with queue.worker(handler):
        await queue.wait(e.id, timeout=5)
    events = [event async for event in queue.watch(e.id)]
    assert [(ev.type, ev.data) for ev in events[:-1]] == WRITTEN


@pytest.mark.parametrize(
    "kind", ["progress", "restarted", "completed", "failed", "cancelled", "Chunk", "", "a" * 33]
)
async def test_emit_refuses_the_queues_own_types_and_bad_names(queue, kind: str) -> None:
    e = await queue.enqueue("p", max_attempts=1)
    refused: list[BaseException] = []

    async def handler(job) -> str:
        for emit in (job.emit("x", type=kind), emit_many([(job, "x", kind)])):
            try:
                await emit
            except EventTypeError as exc:
                refused.append(exc)
        return "ok"

    async with queue.worker(handler):
        assert await queue.wait(e.id, timeout=5) == "ok"
    assert len(refused) == 2 and all(isinstance(exc, ValueError) for exc in refused)
    assert [ev.type async for ev in queue.watch(e.id)] == ["completed"]  # nothing appended


async def test_resume_from_any_cursor_is_exact_for_every_type(queue) -> None:
    e = await queue.enqueue("p")

    async def handler(job) -> None:
        for kind, data in WRITTEN:
            await job.emit(data, type=kind)

    async with queue.worker(handler):
        await queue.wait(e.id, timeout=5)
    events = [event async for event in queue.watch(e.id)]
    for n, event in enumerate(events):
        rest = [ev async for ev in queue.watch(e.id, after=event.id)]
        assert [(ev.id, ev.type, ev.data) for ev in rest] == [
            (ev.id, ev.type, ev.data) for ev in events[n + 1 :]
        ]
