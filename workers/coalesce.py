"""Turns the provider deltas of many jobs into few Redis round trips.

A provider streams a token every few milliseconds per job; with one ``job.emit`` per token, 64
jobs cost 64 round trips per token time. :class:`EmitBatcher` (one per queue, shared by the
queue's running jobs) buffers each job's text and, when the oldest buffered text of *any* job is
``window`` old (10 ms by default) or a job has ``max_chars`` waiting, sends every job's
buffered text in one round trip (``genq.emit_many``): one chunk per job, one pipeline for all.
The first delta or event an emitter is given (an attempt's first token) is sent at once: the
window saves round trips on a stream that is flowing, and would only add to the time to first
token, which a reader waits through with nothing on screen. When no batch is in flight and
nothing else is buffered (an idle worker, the common case), the writer's own task sends it,
alone, and ``write`` returns once it is in the job's stream: a flusher woken instead would
run only once the writer next waits. Otherwise the flusher is woken and sends it at once with
everything else buffered. A writer never carries other jobs' text: its task can be cancelled
in mid round trip (Stop, a lost lease), and only its own attempt, over anyway, may lose what
that round trip carried.

Every event type goes through it: ``write(text, kind, index)`` deltas of one kind (``chunk`` by
default; ``reasoning``; ``tool_args`` with its call's ``index``) merge with the adjacent ones of
the same kind and index, ``write_event(kind, data)`` appends a whole event (``tool_call``,
``tool_done``). A job's events are emitted in the order written, across kinds.

Guarantees:
- Order and content: every written character and event of a job is emitted once, in order
  (one flusher per queue, one batch in flight at a time, a writer's first delta included).
  After a failed or interrupted emit nothing more of that job goes out, so its stream has no
  gap.
- Bounded added latency: an attempt's first delta waits for no window, only for a batch
  already in flight (its ``write`` waits for its own round trip when it sends it itself);
  later text waits at most ``window`` before its batch is sent, plus the
  round trip of a batch already in flight (a local round trip is well under 1 ms). If the
  event loop itself is late (CPU saturated, a garbage collection), that lag adds to it.
- emit keeps its meaning: each job's chunk in a batch renews its lease and reports its cancel
  (the genq worker then cancels that job's handler); between batches the worker's automatic
  heartbeat does. A lost lease or failed batch surfaces on that job's next ``write``/``aclose``.
- Backpressure: ``write`` waits only if Redis falls so far behind that a job has
  ``8 * max_chars`` buffered.

:class:`DirectEmitter` has the same per-job interface and emits every delta in its own round
trip (``window=0``), the reference the benchmark compares against.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from genq import CHUNK, cancel_and_wait, emit_many

DEFAULT_WINDOW = 0.010
DEFAULT_MAX_CHARS = 2048

EmitMany = Callable[
    [Sequence[tuple[Any, Any] | tuple[Any, Any, str]]], Awaitable[list[BaseException | None]]
]
"""``genq.emit_many``: items ``(job, text)`` for chunks, ``(job, data, type)`` for others."""


@dataclass
class EmitStats:
    """Counters shared by the emitters of a process (for the benchmark and metrics)."""

    writes: int = 0
    """Deltas and events written."""
    chunks: int = 0
    """Events appended to job streams (one per job per round trip for text alone)."""
    round_trips: int = 0


class JobEmitter(Protocol):
    """A job's side of an emitter: ``write`` deltas and ``write_event`` events, then ``aclose``
    (or ``abort``)."""

    async def write(self, text: str, kind: str = CHUNK, index: int | None = None) -> None: ...

    async def write_event(self, kind: str, data: Any) -> None: ...

    async def aclose(self) -> None: ...

    def abort(self) -> None: ...


class DirectEmitter:
    """One ``job.emit`` per delta."""

    def __init__(self, job: Any, stats: EmitStats) -> None:
        self._job = job
        self._stats = stats

    async def write(self, text: str, kind: str = CHUNK, index: int | None = None) -> None:
        if not text:
            return
        if kind == CHUNK:
            await self._job.emit(text)
        else:
            await self._job.emit(_delta_data(text, index), type=kind)
        self._count()

    async def write_event(self, kind: str, data: Any) -> None:
        await self._job.emit(data, type=kind)
        self._count()

    def _count(self) -> None:
        self._stats.writes += 1
        self._stats.chunks += 1
        self._stats.round_trips += 1

    async def aclose(self) -> None:
        return None

    def abort(self) -> None:
        return None


def _delta_data(text: str, index: int | None) -> Any:
    """A merged delta's event data: the text, or ``{"index", "delta"}`` for an indexed kind."""
    return text if index is None else {"index": index, "delta": text}


@dataclass(eq=False)
class _Buffer:
    job: Any
    parts: list[str] = field(default_factory=list)
    """The pieces of the run being merged: deltas of ``kind`` (and ``index``)."""
    kind: str = CHUNK
    index: int | None = None
    before: list[tuple[str, Any]] = field(default_factory=list)
    """Events written before that run, not sent yet: (type, data), in order."""
    size: int = 0
    started: bool = False
    """Something was written: the attempt's first delta is out or on its way."""
    in_flight: bool = False
    error: BaseException | None = None
    idle: asyncio.Event = field(default_factory=asyncio.Event)  # nothing buffered or in flight

    def __post_init__(self) -> None:
        self.idle.set()

    def start_run(self, kind: str, index: int | None) -> None:
        if self.parts:
            self.before.append((self.kind, _delta_data("".join(self.parts), self.index)))
            self.parts.clear()
        self.kind, self.index = kind, index

    def take(self) -> list[tuple[str, Any]]:
        """Everything buffered, in order, as (type, data) events; the buffer is left empty."""
        events = self.before
        if self.parts:
            events.append((self.kind, _delta_data("".join(self.parts), self.index)))
            self.parts.clear()
        self.before = []
        self.size = 0
        return events

    def drop(self) -> None:
        self.parts.clear()
        self.before.clear()
        self.size = 0


_Batched = tuple[_Buffer, list[tuple[str, Any]]]
"""A buffer in a round trip, with the (type, data) events taken from it."""


class BatchedEmitter:
    """A job's handle on an :class:`EmitBatcher`."""

    def __init__(self, batcher: EmitBatcher, buffer: _Buffer) -> None:
        self._batcher = batcher
        self._buffer = buffer

    async def write(self, text: str, kind: str = CHUNK, index: int | None = None) -> None:
        buf = self._buffer
        if buf.error is not None:
            raise buf.error
        if not text:
            return
        if kind != buf.kind or index != buf.index:
            buf.start_run(kind, index)
        buf.idle.clear()
        buf.parts.append(text)
        buf.size += len(text)
        if buf.started:
            self._batcher._buffered(buf)
        else:
            await self._first()
        if buf.size >= 8 * self._batcher.max_chars:
            await self._catch_up()

    async def write_event(self, kind: str, data: Any) -> None:
        buf = self._buffer
        if buf.error is not None:
            raise buf.error
        buf.start_run(buf.kind, buf.index)
        buf.idle.clear()
        buf.before.append((kind, data))
        buf.size += 1
        if buf.started:
            self._batcher._buffered(buf)
        else:
            await self._first()
        if buf.size >= 8 * self._batcher.max_chars:
            await self._catch_up()

    async def _first(self) -> None:
        """The first token goes out now; the window is for the rest."""
        self._buffer.started = True
        await self._batcher._send_first(self._buffer)

    async def _catch_up(self) -> None:
        """Backpressure: waits until Redis took this job's buffered events."""
        buf = self._buffer
        await buf.idle.wait()
        if buf.error is not None:
            raise buf.error

    async def aclose(self) -> None:
        """Waits until everything written is in the stream; raises the job's emit error."""
        buf = self._buffer
        try:
            if buf.error is None and not buf.idle.is_set():
                self._batcher._hurry()
                await buf.idle.wait()
        finally:
            self.abort()
        if buf.error is not None:
            raise buf.error

    def abort(self) -> None:
        """Leaves the batcher now; text not yet sent is dropped (the attempt is over)."""
        self._batcher._buffers.pop(self._buffer, None)
        self._buffer.idle.set()


class EmitBatcher:
    """Batches the emits of one queue's jobs; ``open(job)`` for each running job."""

    def __init__(
        self,
        emit: EmitMany = emit_many,
        *,
        window: float = DEFAULT_WINDOW,
        max_chars: int = DEFAULT_MAX_CHARS,
        stats: EmitStats | None = None,
    ) -> None:
        if window <= 0 or max_chars < 1:
            raise ValueError("window must be > 0 and max_chars >= 1")
        self._emit = emit
        self.window = window
        self.max_chars = max_chars
        self.stats = stats or EmitStats()
        self._buffers: dict[_Buffer, None] = {}  # insertion-ordered set
        self._first_at: float | None = None  # when the oldest unsent text was written
        self._pending = asyncio.Event()
        self._urgent = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._in_flight = False  # a batch is on its way: the flusher's or a writer's first
        self._landed = asyncio.Event()  # set while no batch is in flight
        self._landed.set()

    def open(self, job: Any) -> BatchedEmitter:
        buffer = _Buffer(job)
        self._buffers[buffer] = None
        return BatchedEmitter(self, buffer)

    async def aclose(self) -> None:
        """Stops the flusher (after the workers stopped: no job writes any more)."""
        if self._flusher is not None:
            await cancel_and_wait(self._flusher)  # survives a cancel redis-py swallowed
            self._flusher = None

    def _buffered(self, buf: _Buffer) -> None:
        self.stats.writes += 1
        if self._first_at is None:
            self._first_at = time.perf_counter()
            self._pending.set()
        if buf.size >= self.max_chars:
            self._urgent.set()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._run(), name="genq-emit-batcher")

    def _hurry(self) -> None:
        self._urgent.set()
        self._pending.set()

    async def _send_first(self, buf: _Buffer) -> None:
        """Sends an emitter's first delta or event: from the writer's task when Redis is idle
        and nothing else waits, else by the flusher, woken now."""
        if self._in_flight or self._first_at is not None:
            self._buffered(buf)
            self._hurry()
            return
        self.stats.writes += 1
        await self._send([(buf, buf.take())])

    async def _run(self) -> None:
        while True:
            await self._pending.wait()
            first_at = self._first_at if self._first_at is not None else time.perf_counter()
            wait = first_at + self.window - time.perf_counter()
            if wait > 0 and not self._urgent.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._urgent.wait()
            while self._in_flight:  # a writer's first delta: one batch in flight at a time
                await self._landed.wait()
            await self._flush()

    async def _flush(self) -> None:
        batch = [(buf, buf.take()) for buf in self._buffers if buf.parts or buf.before]
        self._first_at = None
        self._pending.clear()
        self._urgent.clear()
        if batch:
            await self._send(batch)

    async def _send(self, batch: list[_Batched]) -> None:
        """One round trip for ``batch`` (each buffer with the events taken from it)."""
        items: list[tuple[Any, Any] | tuple[Any, Any, str]] = []
        for buf, events in batch:
            buf.in_flight = True
            for kind, data in events:
                items.append((buf.job, data) if kind == CHUNK else (buf.job, data, kind))
        self._in_flight = True
        self._landed.clear()
        try:
            errors = await self._emit(items)
        except Exception as exc:  # the whole round trip failed: every job in it sees why
            errors = [exc] * len(items)
        except BaseException:  # cancelled in flight: whether it landed is unknown
            self._landed_as(batch, [RuntimeError("an emit was cancelled in flight")] * len(items))
            raise
        self._landed_as(batch, errors)

    def _landed_as(self, batch: list[_Batched], errors: Sequence[BaseException | None]) -> None:
        """Ends a round trip: marks each of its jobs with its error, or counts its events."""
        self._in_flight = False
        self._landed.set()
        self.stats.round_trips += 1
        position = 0
        for buf, events in batch:
            buf.in_flight = False
            count = len(events)
            error = next((e for e in errors[position : position + count] if e is not None), None)
            position += count
            if error is not None:
                buf.error = buf.error or error
                buf.drop()  # nothing after a failed event: no gap in the stream
            else:
                self.stats.chunks += count
            if not buf.parts and not buf.before:
                buf.idle.set()
