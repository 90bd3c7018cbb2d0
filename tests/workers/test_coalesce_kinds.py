"""The emit batcher with every kind: adjacent deltas of one kind (and index) merge, whole events
never do, and a job's events keep their order across kinds. A recording stand-in for
``genq.emit_many`` (tests/workers/test_generation_parts.py runs it against real jobs)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from genq import CHUNK
from workers.coalesce import DirectEmitter, EmitBatcher, EmitStats


class Job:
    def __init__(self, name: str) -> None:
        self.id = name
        self.events: list[tuple[str, Any]] = []

    async def emit(self, data: Any, type: str = CHUNK) -> None:
        self.events.append((type, data))


class Recorder:
    def __init__(self) -> None:
        self.batches: list[list[tuple[str, str, Any]]] = []

    async def __call__(self, items: Sequence[tuple[Any, ...]]) -> list[BaseException | None]:
        batch = []
        for item in items:
            job, data, kind = (*item, CHUNK) if len(item) == 2 else item
            job.events.append((kind, data))
            batch.append((job.id, kind, data))
        self.batches.append(batch)
        return [None] * len(items)


WRITES: list[tuple[str, Any]] = [
    ("reasoning", "Think"),
    ("reasoning", "ing."),
    ("chunk", "A"),
    ("chunk", "B"),
    ("event", ("tool_call", {"index": 0, "id": "c0", "name": "f"})),
    ("args0", '{"x"'),
    ("args0", ": 1}"),
    ("event", ("tool_call", {"index": 1, "id": "c1", "name": "g"})),
    ("args1", "{"),
    ("args0", ""),  # empty: nothing to write
    ("args1", "}"),
    ("event", ("tool_done", {"index": 0, "id": "c0", "name": "f", "arguments": '{"x": 1}'})),
    ("chunk", "C"),
]
MERGED = [
    ("reasoning", "Thinking."),
    ("chunk", "AB"),
    ("tool_call", {"index": 0, "id": "c0", "name": "f"}),
    ("tool_args", {"index": 0, "delta": '{"x": 1}'}),
    ("tool_call", {"index": 1, "id": "c1", "name": "g"}),
    ("tool_args", {"index": 1, "delta": "{}"}),
    ("tool_done", {"index": 0, "id": "c0", "name": "f", "arguments": '{"x": 1}'}),
    ("chunk", "C"),
]


async def write_all(emitter: Any, writes: list[tuple[str, Any]]) -> None:
    for how, value in writes:
        if how == "event":
            await emitter.write_event(*value)
        elif how.startswith("args"):
            await emitter.write(value, "tool_args", int(how[4:]))
        else:
            await emitter.write(value, how)


async def test_batcher_merges_adjacent_deltas_of_one_kind_and_index() -> None:
    record = Recorder()
    batcher = EmitBatcher(record, window=10.0)
    job = Job("a")
    emitter = batcher.open(job)
    await emitter.write("Hi")  # the first delta goes at once, alone
    await write_all(emitter, WRITES)
    await emitter.aclose()
    await batcher.aclose()
    assert job.events == [("chunk", "Hi"), *MERGED]
    assert len(record.batches) == 2  # then every kind went in one round trip
    assert batcher.stats.chunks == 1 + len(MERGED)


async def test_batcher_keeps_each_jobs_order_across_kinds_and_flushes() -> None:
    """Many small flushes: cutting a run at any point never reorders or loses a piece."""
    record = Recorder()
    batcher = EmitBatcher(record, window=0.0005, max_chars=3)
    rng = random.Random(7)
    jobs = [Job(f"j{n}") for n in range(3)]
    emitters = [batcher.open(job) for job in jobs]
    for _ in range(20):
        for emitter in rng.sample(emitters, len(emitters)):
            await write_all(emitter, WRITES[: rng.randint(1, len(WRITES))])
    for emitter in emitters:
        await emitter.aclose()
    await batcher.aclose()
    assert len(record.batches) > 5
    for job in jobs:
        assert _unmerged(job.events) == _unmerged(_expected(job))


def _expected(job: Job) -> list[tuple[str, Any]]:
    """What the job's writes were, replayed with the same random choices."""
    replay = random.Random(7)
    names = ["j0", "j1", "j2"]
    written: list[tuple[str, Any]] = []
    for _ in range(20):
        for name in replay.sample(names, len(names)):
            writes = WRITES[: replay.randint(1, len(WRITES))]
            if name == job.id:
                written.extend(_as_events(writes))
    return written


def _as_events(writes: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    for how, value in writes:
        if how == "event":
            events.append(value)
        elif how.startswith("args"):
            if value:
                events.append(("tool_args", {"index": int(how[4:]), "delta": value}))
        else:
            events.append((how, value))
    return events


def _unmerged(events: list[tuple[str, Any]]) -> list[tuple[str, Any, Any]]:
    """Deltas split into characters (keyed by kind and index), whole events as they are:
    equal for two streams that differ only in how their deltas were merged."""
    flat: list[tuple[str, Any, Any]] = []
    for kind, data in events:
        if kind in ("chunk", "reasoning"):
            flat.extend((kind, None, ch) for ch in data)
        elif kind == "tool_args":
            flat.extend((kind, data["index"], ch) for ch in data["delta"])
        else:
            flat.append((kind, None, repr(data)))
    return flat


async def test_direct_emitter_writes_each_kind_as_its_own_event() -> None:
    job = Job("a")
    emitter = DirectEmitter(job, EmitStats())
    await write_all(emitter, WRITES)
    assert _unmerged(job.events) == _unmerged(_as_events(WRITES))
    assert len(job.events) == len(_as_events(WRITES))
