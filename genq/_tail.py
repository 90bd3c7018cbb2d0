"""The shared tail: one Redis reader per queue feeds every viewer of that queue's job streams.

A viewer is whatever follows a job's stream as it is written: the gateway's SSE streams and
its waits. A blocking XREAD per viewer would hold one Redis connection per viewer and make
Redis wake every viewer's connection for every token. Instead, per process and per queue,
one task blocks in a single ``XREAD BLOCK ... STREAMS k1 k2 ... id1 id2 ...`` over every job
stream that has viewers, on a connection of its own, and fans each entry out in memory. Redis
connections stay constant however many viewers there are. The tail yields
:class:`genq.StreamEntry` objects, decoded once and shared by every viewer; the server's
framing of each (SSE bytes) is made once too, by the ``frame`` function it gives.

Joining without a gap or a duplicate. For each followed stream the reader keeps a
:class:`Channel` holding the id of the last entry it read (its cursor). A viewer with cursor C
registers on the channel first; from then on it sees every entry the reader publishes. It then
reads the part it missed, (C, channel cursor], with XRANGE, and skips any later entry it has
already yielded. A stream nobody follows yet gets a channel starting at C, and the reader's
own XREAD does the catch-up. Both steps happen without an ``await`` in between, so no entry can
slip past.

Waking the reader. A new stream must join the blocking XREAD at once, so the tail sends
``CLIENT UNBLOCK`` to the reader's connection, which then re-reads with the new stream set.

Ending. A viewer ends after a terminal event; when its job vanished (expired or purged, found
by a periodic check of quiet streams); or when it fell too far behind (its client reconnects
and resumes from its last event id). A viewer that goes away simply unsubscribes.

One viewer cannot stall the others. Cursors are validated before they reach the tail, and if
Redis still refuses the shared XREAD, the tail reads each stream alone to find the one at
fault and ends only its viewers. A channel's cursor is trusted only once the reader published
from it: until then a viewer joining with an earlier cursor moves it back, so a cursor past
the stream's end (``99999999999999-0``) cannot hide new entries from later viewers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError, ResponseError

from ._cancellation import cancel_and_wait
from ._channel import Channel, Viewer
from ._events import StreamEntry, as_text, check_cursor, entry_order, read_entry
from ._stream_reads import read_range

if TYPE_CHECKING:
    from ._queue import Queue
    from ._reader_link import ReaderLinks

log = logging.getLogger("genq.tail")

BACKFILL_PAGE = 500


class Tail:
    """The shared reader of one queue's job streams. ``follow`` is what a follower iterates.

    ``reader_links`` makes the reader's own connection (:func:`genq.reader_links`). ``frame``,
    when given, turns each entry into the bytes a server sends (``StreamEntry.framed``), once
    for all followers. ``block`` (seconds) is the longest XREAD BLOCK; ``batch`` the entries
    per read; ``idle_check`` how often quiet streams are checked for a vanished job;
    ``heartbeat`` how long a quiet stream waits before its followers get an empty batch;
    ``pace`` the least time between two reads while entries flow; ``max_lag`` how many entries
    a follower may fall behind before :class:`ViewerLagged`."""

    def __init__(
        self,
        queue: Queue,
        reader_links: ReaderLinks,
        *,
        block: float = 5.0,
        batch: int = 500,
        idle_check: float = 10.0,
        heartbeat: float = 15.0,
        pace: float = 0.01,
        max_lag: int = 20_000,
        frame: Callable[[StreamEntry], bytes] | None = None,
    ) -> None:
        self.queue = queue
        self.redis = queue.redis
        self.keys = queue.keys
        self._reader_links = reader_links
        self._frame = frame
        self._block_ms = max(1, int(block * 1000))
        self._batch = batch
        self._idle_check = idle_check
        self._heartbeat = heartbeat
        self._pace = pace
        self._max_lag = max_lag
        self._channels: dict[str, Channel] = {}
        self._wake = asyncio.Event()
        self._version = 0
        self._read_version = 0
        self._reading = False
        self._reader: Any = None
        self._reader_id: int | None = None
        self._unblock_reader: Callable[[int], Awaitable[bool]] | None = None
        self._unblocking: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self.viewers = 0
        self.reads = 0

    @property
    def streams(self) -> int:
        return len(self._channels)

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._read_forever(), name=f"tail {self.keys.prefix}"),
            asyncio.create_task(self._sweep_forever(), name=f"tail sweep {self.keys.prefix}"),
            asyncio.create_task(self._beat_forever(), name=f"tail heartbeat {self.keys.prefix}"),
        ]

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        for task in [*self._tasks, self._unblocking]:
            if task is not None:
                await cancel_and_wait(task)
        self.close_all()
        await self._drop_reader()

    def close_all(self) -> None:
        """Ends every viewer (at shutdown: their clients resume elsewhere)."""
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()

    # -- viewers -------------------------------------------------------------------------------

    async def follow(
        self, job_id: str, after: str | None = None, *, until: float | None = None
    ) -> AsyncGenerator[list[StreamEntry], None]:
        """Yields batches of the job's entries strictly after ``after``, in order, once each.

        An empty batch now and then (every ``heartbeat`` seconds) means "nothing new": time
        for a keepalive. Ends after the terminal entry, or (without one) when the job vanished,
        the tail closed or the event loop's clock reached ``until`` (checked between batches:
        one timer per viewer, not one per batch); raises :class:`ViewerLagged` when the
        viewer fell too far behind.
        """
        cursor = check_cursor(after or "0-0")
        last = entry_order(cursor)
        channel = self._channels.get(job_id)
        backfill_to: str | None = None
        if channel is None:
            channel = Channel(job_id, cursor)
            self._channels[job_id] = channel
            self._streams_changed()
        elif channel.cursor_order > last:
            if channel.confirmed:
                backfill_to = channel.cursor
            else:  # an earlier viewer's cursor, maybe past the stream's end: never trust it
                channel.rewind(cursor)
                self._streams_changed()
        viewer = Viewer(channel.end)
        channel.viewers.add(viewer)
        self.viewers += 1
        loop = asyncio.get_running_loop()
        # Wakes the channel's viewers once at ``until``: the others find nothing and wait on.
        alarm = None if until is None else loop.call_at(until, channel.wake)
        try:
            if backfill_to is not None:
                async for batch in self._range(job_id, cursor, backfill_to):
                    yield batch
                    last = batch[-1].order
                    if batch[-1].terminal or (until is not None and loop.time() >= until):
                        return
            while True:
                batch = channel.take(viewer, self._max_lag)
                if batch and batch[0].order <= last:  # seen during the backfill
                    batch = [e for e in batch if e.order > last]
                if batch:
                    yield batch
                    last = batch[-1].order
                    if batch[-1].terminal:
                        return
                elif channel.closed and viewer.index >= channel.end:
                    return
                else:
                    beats = channel.beats
                    await channel.changed()
                    if channel.beats != beats and viewer.index >= channel.end:
                        yield []
                if until is not None and loop.time() >= until:
                    return
        finally:
            if alarm is not None:
                alarm.cancel()
            self.viewers -= 1
            channel.viewers.discard(viewer)
            if not channel.viewers and self._channels.get(job_id) is channel:
                del self._channels[job_id]

    async def _range(self, job_id: str, after: str, upto: str) -> AsyncIterator[list[StreamEntry]]:
        key = self.keys.events(job_id)
        cursor = after
        while True:
            batch = await read_range(self.redis, key, cursor, upto, BACKFILL_PAGE)
            if not batch:
                return
            self._framed(batch)
            yield batch
            if len(batch) < BACKFILL_PAGE or batch[-1].terminal:
                return
            cursor = batch[-1].id

    def _framed(self, entries: list[StreamEntry]) -> None:
        frame = self._frame
        if frame is not None:
            for entry in entries:
                entry.framed = frame(entry)

    # -- the reader ----------------------------------------------------------------------------

    def _streams_changed(self) -> None:
        self._version += 1
        self._wake.set()
        if self._reading and (self._unblocking is None or self._unblocking.done()):
            self._unblocking = asyncio.create_task(self._unblock())

    async def _unblock(self) -> None:
        """Ends the reader's blocking XREAD so it picks up the new stream set.

        CLIENT UNBLOCK is a no-op while the XREAD is still on its way to the server, hence
        the few retries until the read in flight is one that already includes the change."""
        for _ in range(400):
            if not self._reading or self._read_version >= self._version:
                return
            reader_id, unblock = self._reader_id, self._unblock_reader
            if reader_id is None or unblock is None:
                return
            try:
                if await unblock(reader_id):
                    return
            except RedisError as exc:
                log.warning("tail %s: unblock failed: %s", self.keys.prefix, type(exc).__name__)
                return
            await asyncio.sleep(0.005)

    async def _read_forever(self) -> None:
        """Reads until stopped. Whatever goes wrong, the reader reconnects: if it died, every
        viewer of the queue would wait forever."""
        backoff = 0.05
        while not self._stopping:
            try:
                await self._read_until_error()
            except Exception as exc:
                level = logging.WARNING if isinstance(exc, RedisError | OSError) else logging.ERROR
                log.log(
                    level,
                    "tail %s: reader failed (%s), reconnecting in %.2fs",
                    self.keys.prefix,
                    type(exc).__name__,
                    backoff,
                    exc_info=level == logging.ERROR,
                )
                await self._drop_reader()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            else:
                backoff = 0.05

    async def _read_until_error(self) -> None:
        """Blocks in XREAD while the streams are quiet. Once entries flow, reads without
        blocking, at most one read per ``pace`` seconds: each read then carries more entries,
        and Redis no longer registers and releases a blocked client on every stream for every
        entry. An empty read goes back to blocking, so a quiet stream's next entry still
        arrives at once."""
        busy = False
        last_read = 0.0
        while not self._stopping:
            if not self._channels:
                self._wake.clear()
                await self._wake.wait()
                continue
            if self._reader is None:
                link = await self._reader_links(self.keys.tag)
                self._reader, self._unblock_reader = link.reader, link.unblock
                self._reader_id = int(await self._reader.client_id())
            if busy:
                await asyncio.sleep(max(0.0, last_read + self._pace - time.monotonic()))
            snapshot = dict(self._channels)
            if not snapshot:  # the last viewer left while the reader connected or paced
                busy = False
                continue
            streams = {self.keys.events(job_id): c.cursor for job_id, c in snapshot.items()}
            self._read_version = self._version
            self._reading = not busy
            last_read = time.monotonic()
            try:
                reply = await self._reader.xread(
                    streams, count=self._batch, block=None if busy else self._block_ms
                )
            except ResponseError:
                # Redis refused the command, not the connection: find the stream at fault
                # and drop it alone, or the whole queue's viewers would stall behind it.
                if not await self._drop_refused(streams, snapshot):
                    raise
                continue
            finally:
                self._reading = False
            self.reads += 1
            busy = bool(reply)
            if reply:
                self._deliver(snapshot, streams, reply)

    async def _drop_refused(self, streams: dict[str, str], snapshot: dict[str, Channel]) -> int:
        """Reads each stream of a refused XREAD on its own (not blocking) and ends the viewers
        of those Redis refuses too. Returns how many streams were dropped."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for key, cursor in streams.items():
                pipe.xread({key: cursor}, count=1)
            replies = await pipe.execute(raise_on_error=False)
        dropped = 0
        for (job_id, channel), reply in zip(snapshot.items(), replies, strict=True):
            if isinstance(reply, ResponseError) and self._channels.get(job_id) is channel:
                log.warning(
                    "tail %s: Redis refused the cursor of %s: its viewers end",
                    self.keys.prefix,
                    job_id[:80],
                )
                del self._channels[job_id]
                channel.refuse()
                dropped += 1
        return dropped

    def _deliver(self, snapshot: dict[str, Channel], streams: dict[str, str], reply: Any) -> None:
        by_key = {self.keys.events(job_id): c for job_id, c in snapshot.items()}
        for raw_key, raw_entries in reply:
            key = as_text(raw_key)
            channel = by_key.get(key)
            # A channel dropped (or replaced) while the read was in flight gets nothing: a
            # replacement started from its own cursor, which this read did not use. Nor does
            # one rewound meanwhile: the next read starts from its new cursor.
            if (
                channel is None
                or self._channels.get(channel.job_id) is not channel
                or streams[key] != channel.cursor
            ):
                continue
            entries = [read_entry(i, f) for i, f in raw_entries]
            fresh = [e for e in entries if e.order > channel.cursor_order]
            if not fresh:
                continue
            self._framed(fresh)
            channel.publish(fresh)
            if channel.closed:
                del self._channels[channel.job_id]

    async def _drop_reader(self) -> None:
        reader, self._reader, self._reader_id = self._reader, None, None
        self._unblock_reader = None
        if reader is not None:
            with contextlib.suppress(Exception):
                await reader.aclose()

    async def _beat_forever(self) -> None:
        """Wakes the viewers of streams quiet for a whole heartbeat, so they send a keepalive.
        Streams with traffic need none, and checking four times per period spreads the
        keepalives out instead of waking every viewer at once."""
        while not self._stopping:
            await asyncio.sleep(self._heartbeat / 4)
            horizon = time.monotonic() - self._heartbeat
            for channel in list(self._channels.values()):
                if channel.last_activity <= horizon:
                    channel.beat()

    # -- vanished jobs -------------------------------------------------------------------------

    async def _sweep_forever(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self._idle_check)
            try:
                await self.sweep()
            except Exception as exc:
                log.warning("tail %s: sweep failed: %s", self.keys.prefix, type(exc).__name__)

    async def sweep(self, quiet_for: float | None = None) -> int:
        """Ends the viewers of quiet streams whose job record is gone. Returns how many."""
        horizon = time.monotonic() - (self._idle_check if quiet_for is None else quiet_for)
        quiet = [c for c in self._channels.values() if c.last_activity <= horizon]
        if not quiet:
            return 0
        async with self.redis.pipeline(transaction=False) as pipe:
            for channel in quiet:
                pipe.exists(self.keys.job(channel.job_id))
            alive = await pipe.execute()
        gone = 0
        for channel, exists in zip(quiet, alive, strict=True):
            if exists:
                channel.last_activity = time.monotonic()
            elif self._channels.get(channel.job_id) is channel:
                del self._channels[channel.job_id]
                channel.close()
                gone += 1
        return gone
